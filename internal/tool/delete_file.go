package tool

import (
	"context"
	"encoding/json"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/workspace"
)

// DeleteFile is the delete_file tool: removes one file. Risk 70, more for sensitive paths (see
// Risk scores).
// The zero value works on a workspace with the default limits.
type DeleteFile struct{ ws *workspace.Store }

type deleteFileArgs struct {
	Path string `json:"path"`
}

// Spec implements Tool.
func (*DeleteFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: DeleteFileName,
		Description: "Delete one file from the project workspace. It deletes a single file, never a directory's contents; " +
			"fails if the file does not exist.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (*DeleteFile) Risk(args json.RawMessage) int { return changeRisk(riskDeleteFile, args, "path") }

// ReadOnly implements Tool.
func (*DeleteFile) ReadOnly() bool { return false }

// Run implements Tool. The output names the deleted file.
func (t *DeleteFile) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a deleteFileArgs
	if err := decodeArgs(DeleteFileName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	p, err := workspace.NormalizePath(a.Path)
	if err != nil {
		return Result{}, err
	}
	if err := t.ws.Delete(ctx, env.Tx, env.TenantID, env.ProjectID, p); err != nil {
		return Result{}, err
	}
	return Result{Output: "deleted " + p}, nil
}
