package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/workspace"
)

// MaxReadOutputBytes caps what one read_file call returns; the model reads further with offset.
const MaxReadOutputBytes = 64 << 10

// ReadFile is the read_file tool: one file's content, whole or a range of lines. Read-only,
// risk 5 (25 for secrets, see Risk scores).
// The zero value works on a workspace with the default limits.
type ReadFile struct{ ws *workspace.Store }

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// Spec implements Tool.
func (*ReadFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: ReadFileName,
		Description: "Read a text file from the project workspace and return its content exactly as stored. " +
			"Output longer than 64 KiB is cut at a line boundary with a note saying how to continue: " +
			"pass offset (the first line to return, counting from 1) and optionally limit (how many lines) to read a part of a large file.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root, e.g. \"src/main.go\"."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to return, counting from 1 (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to return (default: as many as fit in 64 KiB)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (*ReadFile) Risk(args json.RawMessage) int { return readRisk(riskReadFile, args, "path", false) }

// ReadOnly implements Tool.
func (*ReadFile) ReadOnly() bool { return true }

// Run implements Tool. The output is the content (or the requested lines) as stored, "(empty
// file)" for an empty file, and a bracketed note on its own line after the content when lines
// were left out.
func (t *ReadFile) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a readFileArgs
	if err := decodeArgs(ReadFileName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	f, err := t.ws.Read(ctx, env.Tx, env.TenantID, env.ProjectID, a.Path)
	if err != nil {
		return Result{}, err
	}
	if f.Content == "" {
		return Result{Output: "(empty file)"}, nil
	}
	out, err := sliceLines(f.Path, f.Content, a.Offset, a.Limit, MaxReadOutputBytes)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: out}, nil
}

// sliceLines returns lines offset.. of content (1-based; 0 means 1), at most limit of them (0:
// no limit) and at most maxBytes bytes, cut at a line boundary (a single longer line is cut at
// a character boundary), with a note when anything after was left out.
func sliceLines(path, content string, offset, limit, maxBytes int) (string, error) {
	lines := strings.SplitAfter(content, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	if offset <= 0 {
		offset = 1
	}
	if offset > total {
		return "", apperr.Invalid("offset", "is %d but %s has %s", offset, path, plural(total, "line", "lines"))
	}
	end := total
	if limit > 0 {
		end = min(total, offset-1+limit)
	}
	var b strings.Builder
	last := offset - 1 // lines written, counting from the file's start
	cutMidLine := false
	for i := offset - 1; i < end; i++ {
		if b.Len()+len(lines[i]) > maxBytes {
			if b.Len() == 0 {
				// One line longer than the cap: give its first part.
				cut := maxBytes
				for cut > 0 && !utf8.RuneStart(lines[i][cut]) {
					cut--
				}
				b.WriteString(lines[i][:cut])
				last = i + 1
				cutMidLine = true
			}
			break
		}
		b.WriteString(lines[i])
		last = i + 1
	}
	out := b.String()
	switch {
	case cutMidLine:
		out += fmt.Sprintf("\n[line %d is longer than %s and was cut; %s has %s]", last, formatSize(maxBytes), path, plural(total, "line", "lines"))
	case last < end:
		out = strings.TrimSuffix(out, "\n") + fmt.Sprintf("\n[showing lines %d-%d of %d (output limit %s); call read_file with offset=%d to continue]",
			offset, last, total, formatSize(maxBytes), last+1)
	case last < total:
		out = strings.TrimSuffix(out, "\n") + fmt.Sprintf("\n[showing lines %d-%d of %d]", offset, last, total)
	case offset > 1:
		out = strings.TrimSuffix(out, "\n") + fmt.Sprintf("\n[showing lines %d-%d of %d: the end of the file]", offset, last, total)
	}
	return out, nil
}
