package app

import (
	"context"
	"encoding/json"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/tool"
)

// registryTools offers a tool registry's tools to the executor (agent.Tools).
type registryTools struct{ reg *tool.Registry }

// Specs lists every registered tool.
func (t registryTools) Specs() []llm.ToolSpec {
	specs, err := t.reg.Specs()
	if err != nil {
		return nil
	}
	return specs
}

// Info reports whether the tool exists and only reads.
func (t registryTools) Info(name string) (bool, bool) {
	tl, err := t.reg.Get(name)
	if err != nil {
		return false, false
	}
	return true, tl.ReadOnly()
}

// Risk scores a call; unknown tools score 100.
func (t registryTools) Risk(name string, args json.RawMessage) int {
	tl, err := t.reg.Get(name)
	if err != nil {
		return 100
	}
	return tl.Risk(args)
}

// Run validates and runs a call inside tx.
func (t registryTools) Run(ctx context.Context, tx *db.Tx, c agent.ToolCall) (string, error) {
	res, err := t.reg.Run(ctx, tool.Env{Tx: tx, TenantID: c.TenantID, ProjectID: c.ProjectID, UserID: c.UserID, RunID: c.RunID}, c.Name, c.Args)
	return res.Output, err
}
