package agent

import (
	"context"
	"log/slog"
	"reflect"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/contextwin"
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
	// ReserveTx is Reserve inside tx, the transaction that acquires the run: it reserves on the
	// run's stripes only, and holds nothing (without error) when a stripe is short, leaving the
	// decision on the budgets' totals to Reserve.
	ReserveTx(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, m llm.Model, req llm.Request) (held bool, err error)
	// Settle records the call's actual usage against the budgets inside tx (once per call).
	Settle(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, u llm.Usage, costMicros int64) error
	// Release gives back what the attempt reserved for the call.
	Release(ctx context.Context, l run.Lease, callIndex int) error
}

// preReserved is a call's reservation made ahead, with the request it was made for.
type preReserved struct {
	callIndex int
	req       llm.Request
}

// reserve holds the budget for a call about to be made with p and req. The first call of a
// chat turn was usually reserved with the lease already (reserveFirst): when req is the
// request that reservation was made for, it is used as it is.
func (a *attempt) reserve(ctx context.Context, p llm.Provider, req llm.Request, callIndex int) (bool, error) {
	return a.reserveOn(ctx, llm.Lookup(p.Name(), req.Model), req, callIndex)
}

// reserveOn is the one reservation path of every model call a run makes (its turns, and the
// context summaries through summaryMeter): req's worst case on model, keyed by callIndex.
func (a *attempt) reserveOn(ctx context.Context, model llm.Model, req llm.Request, callIndex int) (bool, error) {
	if a.e.budgets == nil {
		return false, nil
	}
	if pre := a.pre; pre != nil && pre.callIndex == callIndex {
		a.pre = nil
		if reflect.DeepEqual(pre.req, req) {
			return true, nil
		}
		a.release(ctx, callIndex) // the request changed (compacted): reserve it anew
	}
	return a.e.budgets.Reserve(ctx, a.lease, callIndex, model, req)
}

// reserveFirst reserves, inside tx (the transaction that acquires the run), the first call of
// an attempt that starts with a model call whose request needs no summary: the reservation
// then commits with the lease instead of in a transaction of its own.
func (a *attempt) reserveFirst(ctx context.Context, tx *db.Tx, l run.Lease, st state) error {
	if a.e.budgets == nil || a.e.window == nil || a.built == nil || st.run.MustReflect ||
		st.run.StopRequested || st.run.PauseRequested || len(pendingCalls(st.calls)) > 0 {
		return nil
	}
	if _, ok := a.lastReply(st.hist); ok {
		return nil
	}
	p, model, err := a.e.models.Resolve(a.conv.Model)
	if err != nil {
		return nil // the attempt fails on it when it calls
	}
	req := a.baseRequest(model, st, false)
	if *a.built != "" {
		req.System += "\n\n" + *a.built
	}
	w, fits := a.e.window.Fit(a.windowInput(model, req, st, false))
	if !fits {
		return nil // the window manager summarises first: that call is reserved on its own
	}
	req.System, req.Messages = w.System, toLLM(w.Messages)
	callIndex := max(int(st.run.LlmCalls), a.llmCalls(st.hist))
	held, err := a.e.budgets.ReserveTx(ctx, tx, l, callIndex, llm.Lookup(p.Name(), req.Model), req)
	if err != nil || !held {
		return err
	}
	a.pre = &preReserved{callIndex: callIndex, req: req}
	return nil
}

// releaseUnused gives back a reservation made ahead that no call used.
func (a *attempt) releaseUnused(ctx context.Context) {
	if a.pre != nil {
		a.release(ctx, a.pre.callIndex)
		a.pre = nil
	}
}

// release gives a failed call's reservation back; when that fails the sweeper does it later.
func (a *attempt) release(ctx context.Context, callIndex int) {
	if a.e.budgets == nil {
		return
	}
	if err := a.e.budgets.Release(context.WithoutCancel(ctx), a.lease, callIndex); err != nil {
		a.log.WarnContext(ctx, "release budget reservation", slog.Int("call_index", callIndex), slog.Any("error", err))
	}
}

// settle records a stored call's usage against the budgets in its transaction.
func (a *attempt) settle(ctx context.Context, tx *db.Tx, callIndex int, u llm.Usage, costMicros int64) error {
	if a.e.budgets == nil {
		return nil
	}
	return a.e.budgets.Settle(ctx, tx, a.lease, callIndex, u, costMicros)
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

// summaryMeter reserves the context window's summarisation calls of one request
// (contextwin.Meter) on the run's budgets, through reserveOn like the run's own calls: each
// takes the next negative call index, its reservation is settled when the window is persisted
// (settleSummaries), and a refusal makes the window fall back to truncation.
type summaryMeter struct {
	a    *attempt
	next int // the next call index; 0 until read from the run's usage records
	held map[int]bool
}

func (m *summaryMeter) Reserve(ctx context.Context, model llm.Model, req llm.Request) (int, error) {
	if m.next == 0 {
		r := m.a.lease.Run
		err := m.a.e.db.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			m.next, err = contextwin.NextSummaryIndex(ctx, tx, r)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	idx := m.next
	m.next--
	held, err := m.a.reserveOn(ctx, model, req, idx)
	if err != nil {
		return 0, err
	}
	if held {
		if m.held == nil {
			m.held = map[int]bool{}
		}
		m.held[idx] = true
	}
	return idx, nil
}

func (m *summaryMeter) Release(ctx context.Context, callIndex int) {
	if m.held[callIndex] {
		delete(m.held, callIndex)
		m.a.release(ctx, callIndex)
	}
}

// Spent meters summarisation call callIndex alone, in a transaction of its own, and settles
// its reservation: the run was cancelled or timed out while the summary was made, so the
// window that would have stored it is not used. No event says so (as meterAlone).
func (m *summaryMeter) Spent(ctx context.Context, callIndex int, provider string, model llm.Model, u llm.Usage) {
	ctx = context.WithoutCancel(ctx)
	a := m.a
	err := a.e.db.InTx(ctx, a.lease.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
		met, err := contextwin.MeterCall(ctx, tx, a.lease.Run, a.lease.Attempt, provider, model, callIndex, u)
		if err != nil || met == nil {
			return err
		}
		return a.settle(ctx, tx, callIndex, u, met.CostMicros)
	})
	if err != nil {
		a.log.WarnContext(ctx, "meter a summarisation call whose window the run did not use", slog.Int("call_index", callIndex), slog.Any("error", err))
		m.Release(ctx, callIndex)
		return
	}
	delete(m.held, callIndex)
}

// settleSummaries settles, inside tx, the reservations of the summarisation calls Persist
// metered; reservations of calls it did not meter stay held for releaseSummaries.
func (m *summaryMeter) settleSummaries(ctx context.Context, tx *db.Tx, metered []contextwin.Metered) error {
	for _, c := range metered {
		if err := m.a.settle(ctx, tx, c.Index, c.Usage, c.CostMicros); err != nil {
			return err
		}
	}
	return nil
}

// releaseSummaries gives back what is still held after the window was persisted (settled is
// what its transaction settled) or failed to be (settled is nil).
func (m *summaryMeter) releaseSummaries(ctx context.Context, settled []contextwin.Metered) {
	for _, c := range settled {
		delete(m.held, c.Index)
	}
	for idx := range m.held {
		m.Release(ctx, idx)
	}
}
