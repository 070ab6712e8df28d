package agent

import (
	"context"
	"encoding/json"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/tool"
)

// RegistryTools offers a tool registry's tools to the executor.
type RegistryTools struct{ Registry *tool.Registry }

// Specs lists every registered tool.
func (t RegistryTools) Specs() []llm.ToolSpec {
	specs, err := t.Registry.Specs()
	if err != nil {
		return nil
	}
	return specs
}

// Info reports whether the tool exists and only reads.
func (t RegistryTools) Info(name string) (bool, bool) {
	tl, err := t.Registry.Get(name)
	if err != nil {
		return false, false
	}
	return true, tl.ReadOnly()
}

// Risk scores a call; unknown tools score 100.
func (t RegistryTools) Risk(name string, args json.RawMessage) int {
	tl, err := t.Registry.Get(name)
	if err != nil {
		return 100
	}
	return tl.Risk(args)
}

// Run validates and runs a call inside tx.
func (t RegistryTools) Run(ctx context.Context, tx *db.Tx, c ToolCall) (string, error) {
	res, err := t.Registry.Run(ctx, tool.Env{Tx: tx, TenantID: c.TenantID, ProjectID: c.ProjectID, UserID: c.UserID, RunID: c.RunID}, c.Name, c.Args)
	return res.Output, err
}
