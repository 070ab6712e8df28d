package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/memory"
)

// Names of the memory tools.
const (
	RememberName = "remember"
	RecallName   = "recall"
)

// riskRemember scores remember: it writes, but only a note the user can see and delete.
const riskRemember = 10

// MemoryTools returns the memory tools: remember and recall.
func MemoryTools() []Tool { return []Tool{Remember{}, Recall{}} }

// Remember is the remember tool: keeps a fact about the user or the project for later
// conversations (internal/memory). Not read-only, risk 10.
type Remember struct{}

type rememberArgs struct {
	Content string `json:"content"`
}

// Spec implements Tool.
func (Remember) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: RememberName,
		Description: "Remember a fact for later conversations with this user in this project: a preference, a decision, a name, a constraint. " +
			"Write one self-contained sentence (it is recalled later without this conversation around it). " +
			"Relevant memories are put into your context automatically; the user can see and delete them.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "content": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "The fact, e.g. \"The user prefers British spelling.\""}
  },
  "required": ["content"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (Remember) Risk(json.RawMessage) int { return riskRemember }

// ReadOnly implements Tool.
func (Remember) ReadOnly() bool { return false }

// Run implements Tool.
func (Remember) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a rememberArgs
	if err := decodeArgs(RememberName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	m, err := memory.Remember(ctx, env.Tx, memory.Scope{TenantID: env.TenantID, UserID: env.UserID, ProjectID: env.ProjectID}, a.Content, env.RunID)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: fmt.Sprintf("remembered: %s", m.Content)}, nil
}
