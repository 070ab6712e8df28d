package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/workspace"
)

// EditFile is the edit_file tool: an exact string replacement in one file. Risk 35, more for
// sensitive paths (see Risk scores).
// The zero value works on a workspace with the default limits.
type EditFile struct{ ws *workspace.Store }

type editFileArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// Spec implements Tool.
func (*EditFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: EditFileName,
		Description: "Replace exact text in an existing file of the project workspace. " +
			"old_string must match the file exactly, including whitespace and indentation, and must occur exactly once " +
			"unless replace_all is true; include enough surrounding lines to make it unique. " +
			"Read the file first. Fails without changing anything when old_string is not found or is ambiguous.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root."},
    "old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace."},
    "new_string": {"type": "string", "description": "The text to put in its place (may be empty to delete old_string)."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence of old_string instead of requiring exactly one (default false)."}
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (*EditFile) Risk(args json.RawMessage) int { return changeRisk(riskEditFile, args, "path") }

// ReadOnly implements Tool.
func (*EditFile) ReadOnly() bool { return false }

// Run implements Tool. The output names the file, the number of replacements and the new
// version.
func (t *EditFile) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a editFileArgs
	if err := decodeArgs(EditFileName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	p, err := workspace.NormalizePath(a.Path)
	if err != nil {
		return Result{}, err
	}
	v, n, err := t.ws.Edit(ctx, env.Tx, env.TenantID, env.ProjectID, p, a.OldString, a.NewString, a.ReplaceAll)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: fmt.Sprintf("edited %s: replaced %s (version %d)", p, plural(n, "occurrence", "occurrences"), v)}, nil
}
