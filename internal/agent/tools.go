package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/llm"
)

// tools is what this attempt may call: the executor's tools (or the ones its kind's hooks
// scoped for the run, ToolScope), narrowed by the run's limits (AllowTool) when they name a set,
// else without the restricted ones (Restrict).
func (a *attempt) tools() Tools {
	base := a.e.tools
	if a.scoped != nil {
		base = a.scoped
	}
	if base == nil {
		return nil
	}
	if a.limits.AllowTool == nil {
		if len(a.e.restricted) == 0 {
			return base
		}
		return allowedTools{Tools: base, allow: func(name string) bool { return !a.e.restricted[name] }}
	}
	return allowedTools{Tools: base, allow: a.limits.AllowTool}
}

// allowedTools offers only the tools allow names. A call to another fails as unavailable: it
// is known and changes nothing (so no person is asked about it), and running it is an error
// the model reads.
type allowedTools struct {
	Tools
	allow func(string) bool
}

func (a allowedTools) Specs() []llm.ToolSpec {
	var out []llm.ToolSpec
	for _, s := range a.Tools.Specs() {
		if a.allow(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

func (a allowedTools) Info(name string) (bool, bool) {
	if !a.allow(name) {
		return true, true
	}
	return a.Tools.Info(name)
}

func (a allowedTools) Risk(name string, args json.RawMessage) int {
	if !a.allow(name) {
		return 0
	}
	return a.Tools.Risk(name, args)
}

func (a allowedTools) Run(ctx context.Context, tx *db.Tx, c ToolCall) (string, error) {
	if !a.allow(c.Name) {
		return "", fmt.Errorf("tool %s is not available to this run", c.Name)
	}
	return a.Tools.Run(ctx, tx, c)
}
