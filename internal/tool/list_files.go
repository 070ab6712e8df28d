package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/workspace"
)

// ListFiles is the list_files tool: the workspace's file paths (with size and version) at or
// under a prefix. Read-only, risk 0.
// The zero value works on a workspace with the default limits.
type ListFiles struct{ ws *workspace.Store }

type listFilesArgs struct {
	Prefix string `json:"prefix"`
	Limit  int    `json:"limit"`
}

// Spec implements Tool.
func (*ListFiles) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: ListFilesName,
		Description: "List the files in the project workspace, sorted by path, with each file's size and version. " +
			"The workspace holds text files only; directories exist only as path prefixes. " +
			"Give prefix to list one directory and everything beneath it (\"src\" lists src/... but not srcfoo); " +
			"omit it to list the whole workspace. Long listings are cut; narrow the prefix to see more.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "prefix": {"type": "string", "description": "Directory (or file) path relative to the workspace root, e.g. \"src\" or \"docs/guide\". Omit or \"\" for the whole workspace."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most paths to return (default 200)."}
  },
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool: listing shows names only.
func (*ListFiles) Risk(json.RawMessage) int { return riskListFiles }

// ReadOnly implements Tool.
func (*ListFiles) ReadOnly() bool { return true }

// Run implements Tool. The output is one line per file, "path (size, vN)", and a note when the
// listing was cut.
func (t *ListFiles) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a listFilesArgs
	if err := decodeArgs(ListFilesName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	prefix, err := workspace.NormalizePrefix(a.Prefix)
	if err != nil {
		return Result{}, err
	}
	l, err := t.ws.List(ctx, env.Tx, env.TenantID, env.ProjectID, prefix, a.Limit)
	if err != nil {
		return Result{}, err
	}
	if len(l.Files) == 0 {
		if prefix == "" {
			return Result{Output: "the workspace is empty"}, nil
		}
		return Result{Output: fmt.Sprintf("no files under %q", prefix)}, nil
	}
	var b strings.Builder
	for _, f := range l.Files {
		fmt.Fprintf(&b, "%s (%s, v%d)\n", f.Path, formatSize(f.Size), f.Version)
	}
	if l.Truncated {
		fmt.Fprintf(&b, "[listing cut after %s; more exist: give a narrower prefix]\n", plural(len(l.Files), "file", "files"))
	}
	return Result{Output: strings.TrimSuffix(b.String(), "\n")}, nil
}
