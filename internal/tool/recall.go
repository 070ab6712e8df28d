package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/memory"
)

// recallTokens bounds what one recall call returns.
const recallTokens = 2000

// Recall is the recall tool: searches what was remembered about the user and the project.
// Read-only, risk 0.
type Recall struct{}

type recallArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// Spec implements Tool.
func (Recall) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: RecallName,
		Description: "Search what was remembered (with remember) about this user and this project, by words it contains. " +
			"Returns the best matching memories, one per line.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "Words to look for, e.g. \"spelling preference\"."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most memories to return (default 5)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (Recall) Risk(json.RawMessage) int { return 0 }

// ReadOnly implements Tool.
func (Recall) ReadOnly() bool { return true }

// Run implements Tool.
func (Recall) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a recallArgs
	if err := decodeArgs(RecallName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	if a.Limit <= 0 {
		a.Limit = 5
	}
	mems, err := memory.Recall(ctx, env.Tx, memory.Scope{TenantID: env.TenantID, UserID: env.UserID, ProjectID: env.ProjectID}, a.Query, a.Limit, recallTokens)
	if err != nil {
		return Result{}, err
	}
	if len(mems) == 0 {
		return Result{Output: fmt.Sprintf("nothing remembered matches %q", a.Query)}, nil
	}
	var b strings.Builder
	for _, m := range mems {
		fmt.Fprintf(&b, "- %s (%s)\n", m.Content, m.CreatedAt.UTC().Format("2006-01-02"))
	}
	return Result{Output: strings.TrimSuffix(b.String(), "\n")}, nil
}
