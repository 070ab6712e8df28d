package agent

import (
	"context"
	"log/slog"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// Budgets enforces spending limits around every model call (internal/usage implements it):
// the call's worst case is reserved before it is made, its actual usage settled in the
// transaction that stores its reply and usage record, and a call that fails gives its
// reservation back. Reservations are keyed by (run, call index, attempt).
type Budgets interface {
	// Reserve holds the call's worst case; held reports whether anything was reserved. A
	// BUDGET_EXCEEDED apperr means a budget has no room: the run ends TERMINAL budget_exceeded.
	Reserve(ctx context.Context, l run.Lease, callIndex int, m llm.Model, req llm.Request) (held bool, err error)
	// Settle records the call's actual usage against the budgets inside tx (once per call).
	Settle(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, u llm.Usage, costMicros int64) error
	// Release gives back what the attempt reserved for the call.
	Release(ctx context.Context, l run.Lease, callIndex int) error
}

// SetBudgets connects budget enforcement (nil: none).
func (e *Executor) SetBudgets(b Budgets) { e.budgets = b }

// reserve holds the budget for a call about to be made with p and req.
func (t *turn) reserve(ctx context.Context, p llm.Provider, req llm.Request, callIndex int) (bool, error) {
	if t.e.budgets == nil {
		return false, nil
	}
	return t.e.budgets.Reserve(ctx, t.lease, callIndex, llm.Lookup(p.Name(), req.Model), req)
}

// release gives a failed call's reservation back; when that fails the sweeper does it later.
func (t *turn) release(ctx context.Context, callIndex int) {
	if err := t.e.budgets.Release(context.WithoutCancel(ctx), t.lease, callIndex); err != nil {
		t.log.WarnContext(ctx, "release budget reservation", slog.Int("call_index", callIndex), slog.Any("error", err))
	}
}

// settle records a stored call's usage against the budgets in its transaction.
func (t *turn) settle(ctx context.Context, tx *db.Tx, callIndex int, u llm.Usage, costMicros int64) error {
	if t.e.budgets == nil {
		return nil
	}
	return t.e.budgets.Settle(ctx, tx, t.lease, callIndex, u, costMicros)
}

// budgetOutcome is how a run ends when a budget refused its next call: FAILED, TERMINAL,
// terminationReason budget_exceeded; what it already produced stays.
func budgetOutcome(err error) (run.Outcome, bool) {
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.BudgetExceeded {
		return run.Outcome{}, false
	}
	return run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: ReasonBudget, Error: e.Message}, true
}
