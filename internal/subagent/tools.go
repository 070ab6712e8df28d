package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/tool"
)

// Tools returns spawn_subagent and wait_subagents over s, to register in the tool registry.
func (s *Service) Tools() []tool.Tool { return []tool.Tool{spawnTool{s}, waitTool{s}} }

type spawnTool struct{ s *Service }

func (spawnTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: SpawnToolName,
		Description: "Hand a sub-task to a specialised sub-agent that works on it on its own and returns its final answer. " +
			"Returns the sub-agent's id at once; call wait_subagents to get its result. Roles: RESEARCHER (gathers and analyses information, reads only), " +
			"CODER (writes and changes files), REVIEWER (reviews, reads only), TESTER (writes and runs tests), ANALYST (analyses data, reads only), " +
			"CREATIVE (writing and ideas, no tools), GENERAL. Priority 1 is the highest (default 5).",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["role","goal"],"properties":{` +
			`"role":{"type":"string","enum":["RESEARCHER","CODER","REVIEWER","TESTER","ANALYST","CREATIVE","GENERAL"]},` +
			`"goal":{"type":"string","minLength":1,"maxLength":20000,"description":"what the sub-agent is to do, with everything it needs to know"},` +
			`"priority":{"type":"integer","description":"1 (highest) to 10, default 5"},` +
			`"max_turns":{"type":"integer","description":"1 to 100, default 20"},` +
			`"max_tokens":{"type":"integer","description":"1000 to 1000000, default 100000"},` +
			`"timeout_minutes":{"type":"integer","description":"1 to 240, default 60"}}}`),
	}
}

// Risk is low: a sub-agent gets no tool its parent lacks.
func (spawnTool) Risk(json.RawMessage) int { return 10 }

// ReadOnly is false: a spawn is a step's effect, committed with it (never twice).
func (spawnTool) ReadOnly() bool { return false }

type spawnArgs struct {
	Role           string `json:"role"`
	Goal           string `json:"goal"`
	Priority       int    `json:"priority"`
	MaxTurns       int    `json:"max_turns"`
	MaxTokens      int    `json:"max_tokens"`
	TimeoutMinutes int    `json:"timeout_minutes"`
}

func (t spawnTool) Run(ctx context.Context, env tool.Env, raw json.RawMessage) (tool.Result, error) {
	if env.Tx == nil {
		return tool.Result{}, errors.New("tool: no transaction in the environment")
	}
	var a spawnArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tool.Result{}, &tool.ArgumentError{Tool: SpawnToolName, Problems: []string{err.Error()}}
	}
	parent, err := env.Tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: env.TenantID, ID: env.RunID})
	if err != nil {
		return tool.Result{}, fmt.Errorf("load run: %w", err)
	}
	sa, err := t.s.spawn(ctx, env.Tx, parent, Spawn(a), "tool")
	if err != nil {
		return tool.Result{}, err
	}
	out, _ := json.Marshal(map[string]any{"id": sa.ID.String(), "role": sa.Role, "status": sa.Status, "priority": sa.Priority,
		"depth": sa.Depth, "tools": sa.Tools, "note": "started; call wait_subagents to get its result"})
	return tool.Result{Output: string(out)}, nil
}

type waitTool struct{ s *Service }

func (waitTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: WaitToolName,
		Description: "Wait until sub-agents you started have ended (all of them when no ids are given), at most timeout_seconds " +
			"(default 600). Returns each one's status and its final answer, or its error and failure class.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
			`"ids":{"type":"array","items":{"type":"string"},"maxItems":100},` +
			`"timeout_seconds":{"type":"integer","minimum":1,"maximum":14400}}}`),
	}
}

func (waitTool) Risk(json.RawMessage) int { return 0 }

// ReadOnly: waiting changes nothing (the executor parks the run before the step, see Park).
func (waitTool) ReadOnly() bool { return true }

// resultBudget is how many characters of final answers one wait_subagents call hands the model
// in all (each answer gets its share, at most maxResultChars); the whole answers stay stored.
const (
	resultBudget   = 24_000
	maxResultChars = 8_000
)

func (t waitTool) Run(ctx context.Context, env tool.Env, raw json.RawMessage) (tool.Result, error) {
	if env.Tx == nil {
		return tool.Result{}, errors.New("tool: no transaction in the environment")
	}
	var a waitArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tool.Result{}, &tool.ArgumentError{Tool: WaitToolName, Problems: []string{err.Error()}}
	}
	tx := env.Tx
	r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: env.TenantID, ID: env.RunID})
	if err != nil {
		return tool.Result{}, err
	}
	ids, err := t.s.waitIDs(ctx, tx, r, a.IDs)
	if err != nil {
		return tool.Result{}, err
	}
	if len(ids) == 0 {
		return tool.Result{Output: `{"subagents":[],"note":"this run has started no sub-agents"}`}, nil
	}
	if r.WaitUntil != nil || r.WaitFor != nil {
		if err := clearWait(ctx, tx, r); err != nil {
			return tool.Result{}, err
		}
	}
	rows, err := tx.Q.SubagentListByIDs(ctx, dbsqlc.SubagentListByIDsParams{TenantID: env.TenantID, Ids: ids})
	if err != nil {
		return tool.Result{}, err
	}
	share := min(maxResultChars, resultBudget/max(len(rows), 1))
	type item struct {
		ID           string  `json:"id"`
		Role         string  `json:"role"`
		Status       Status  `json:"status"`
		Result       *string `json:"result,omitempty"`
		Truncated    bool    `json:"truncated,omitempty"`
		Error        *string `json:"error,omitempty"`
		FailureClass *string `json:"failureClass,omitempty"`
	}
	items := make([]item, 0, len(rows))
	pending := 0
	for _, sa := range rows {
		it := item{ID: sa.ID.String(), Role: sa.Role, Status: sa.Status, Error: sa.Error, FailureClass: sa.FailureClass}
		if sa.Result != nil {
			res := truncate(*sa.Result, share)
			it.Result, it.Truncated = &res, res != *sa.Result
		}
		if !run.IsTerminal(run.Status(sa.Status)) {
			pending++
		}
		items = append(items, it)
	}
	out := map[string]any{"subagents": items}
	if pending > 0 {
		out["note"] = fmt.Sprintf("%d have not ended yet (the wait timed out, or was asked in a step that changes something); call wait_subagents again to wait for them", pending)
	}
	b, _ := json.Marshal(out)
	return tool.Result{Output: string(b)}, nil
}

func clearWait(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	return tx.Q.RunClearWait(ctx, dbsqlc.RunClearWaitParams{TenantID: r.TenantID, ID: r.ID})
}
