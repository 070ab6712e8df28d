package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/workspace"
)

// WriteFile is the write_file tool: creates a file or replaces its whole content. Risk 40, more
// for sensitive paths (see Risk scores).
// The zero value works on a workspace with the default limits.
type WriteFile struct{ ws *workspace.Store }

type writeFileArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// Spec implements Tool.
func (*WriteFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: WriteFileName,
		Description: "Create a text file in the project workspace, or replace an existing file's whole content. " +
			"Parent directories need not exist. Files are UTF-8 text of at most 1 MiB. " +
			"To change part of an existing file prefer edit_file, which keeps the rest of the file as it is.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root, e.g. \"notes/plan.md\"."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (*WriteFile) Risk(args json.RawMessage) int { return changeRisk(riskWriteFile, args, "path") }

// ReadOnly implements Tool.
func (*WriteFile) ReadOnly() bool { return false }

// Run implements Tool. The output says whether the file was created or replaced, its size and
// its new version.
func (t *WriteFile) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a writeFileArgs
	if err := decodeArgs(WriteFileName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	p, err := workspace.NormalizePath(a.Path)
	if err != nil {
		return Result{}, err
	}
	if a.Content == nil {
		return Result{}, &ArgumentError{Tool: WriteFileName, Problems: []string{`arguments: missing property 'content'`}}
	}
	v, err := t.ws.Write(ctx, env.Tx, env.TenantID, env.ProjectID, p, *a.Content)
	if err != nil {
		return Result{}, err
	}
	verb := "replaced"
	if v == 1 {
		verb = "created"
	}
	return Result{Output: fmt.Sprintf("%s %s (%s, version %d)", verb, p, formatSize(len(*a.Content)), v)}, nil
}
