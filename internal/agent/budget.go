package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
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
	// ReserveTx is Reserve as one statement of tx, which holds l's lease already (it may go
	// with tx's COMMIT), with the reservation lasting until expires at most. refused reports a
	// budget without room: nothing was reserved or recorded, and the call is to reserve on its
	// own (Reserve).
	ReserveTx(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, m llm.Model, req llm.Request, expires time.Time) (held, refused bool, err error)
	// Settle records the call's actual usage against the budgets inside tx (once per call), in
	// one statement (it may go with tx's COMMIT).
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

// early is the first model call of an attempt, built and reserved in the transaction that
// acquires the run (preload), so a chat turn reaches its model without a transaction of its
// own for the reservation: one commit fewer before the first token. The reservation goes with
// that transaction's COMMIT (db.Tx.AtCommit), so the budget stripes it locks are held only
// while Postgres commits. The REACT step uses req for its first call (callIndex) and takes the
// reservation's result instead of reserving.
type early struct {
	callIndex int
	req       llm.Request
	held      bool
	// used is set when the REACT step took req as its request.
	used bool
	// histLen and last identify the history req was built from.
	histLen int
	last    uuid.UUID
	// p is the provider req is for. stream (or streamErr) is req's call, started by prestart
	// while the acquisition committed and set when ready closes; stop cancels it.
	p         llm.Provider
	started   bool
	ready     chan struct{}
	stream    llm.Stream
	streamErr error
	stop      context.CancelCauseFunc
}

// prestart sends the early call's request while the acquisition's COMMIT is on its way
// (run.Service.AcquireEarly): its reservation was made by a statement of that transaction,
// which Postgres has run and whose budget rows stay locked until the commit ends, so the
// request is sent with its budget held, and the commit's WAL flush overlaps the model's time
// to first token. The stream is read by the REACT step's first call (call), after the commit
// is confirmed; nothing of it is published or stored before. ctx is the attempt's; the call
// ties the stream to its own context when it takes it.
//
// The request goes out in a goroutine of its own, so nothing waits for the model here: the
// call waits for it (takeStream), under the attempt's deadline and cancellation.
func (t *turn) prestart(ctx context.Context) {
	e := t.early
	if e == nil || e.p == nil {
		return
	}
	sctx, stop := context.WithCancelCause(ctx)
	e.started, e.stop, e.ready = true, stop, make(chan struct{})
	go func() {
		defer close(e.ready)
		e.stream, e.streamErr = e.p.Stream(sctx, e.req)
	}()
}

// dropPrestart ends a stream prestart began that no call took: the acquisition did not commit,
// or the attempt ended before its first call.
func (t *turn) dropPrestart() {
	if e := t.early; e != nil {
		e.closeStream()
	}
}

func (e *early) closeStream() {
	if !e.started {
		return
	}
	e.started = false
	e.stop(errors.New("model request not used"))
	<-e.ready
	if e.stream != nil {
		_ = e.stream.Close()
	}
}

// takeStream returns the prestarted stream (or its error) for a call made under ctx, once the
// request has its answer: ctx's end cancels it as it would a stream the call started itself.
func (e *early) takeStream(ctx context.Context) (s llm.Stream, err error, ok bool) {
	if !e.started {
		return nil, nil, false
	}
	e.started = false
	stop := e.stop
	context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })
	<-e.ready
	return e.stream, e.streamErr, true
}

// sameHistory reports whether hist is the history e's request was built from.
func (e *early) sameHistory(hist []dbsqlc.Message) bool {
	return len(hist) == e.histLen && (len(hist) == 0 || hist[len(hist)-1].ID == e.last)
}

// reserveEarly builds and reserves the attempt's first call inside tx when nothing can change
// it before the loop makes it: the first attempt of a chat turn (a later one reserves on its
// own, which first gives back what earlier attempts still hold) whose next step is a model
// call (no pending tool calls, no stored reply, no reflection, no stop or pause asked), and a
// context that fits without summarising (summarising calls a model: Apply does it later). In
// every other case the call is reserved on its own, as before.
func (t *turn) reserveEarly(ctx context.Context, tx *db.Tx, l run.Lease, st state) error {
	t.lease = l // lastReply and llmCalls read the run's id from it
	r := st.run
	if t.e.budgets == nil || l.Run.Kind != run.KindChatTurn || l.Attempt != 1 || r.StopRequested || r.PauseRequested || r.MustReflect ||
		r.LlmCalls > 0 || len(pendingCalls(st.calls)) > 0 || t.llmCalls(st.hist) > 0 {
		return nil
	}
	if _, ok := t.lastReply(st.hist); ok {
		return nil
	}
	p, model, err := t.e.models.Resolve(t.conv.Model)
	if err != nil {
		return nil // the loop reports it
	}
	req, ok := t.fittedRequest(model, st)
	if !ok {
		return nil
	}
	// The attempt's deadline (work) starts after this transaction: two minutes of slack (Reserve
	// gives one past the attempt's deadline).
	expires := time.Now().Add(time.Duration(t.set.TimeoutSeconds)*time.Second + 2*time.Minute)
	tx.AtCommit(func(ctx context.Context, tx *db.Tx) error {
		held, refused, err := t.e.budgets.ReserveTx(ctx, tx, l, 0, llm.Lookup(p.Name(), req.Model), req, expires)
		if err != nil || refused {
			return err // refused: the call reserves on its own, which records the refusal
		}
		t.early = &early{callIndex: 0, req: req, held: held, histLen: len(st.hist), p: p}
		if n := len(st.hist); n > 0 {
			t.early.last = st.hist[n-1].ID
		}
		return nil
	})
	return nil
}

// takeEarly returns the early reservation of call callIndex, once, when the call is made with
// its request; one whose request was not used is given back (the call reserves its own).
func (t *turn) takeEarly(ctx context.Context, callIndex int) (*early, bool) {
	e := t.early
	if e == nil || e.callIndex != callIndex {
		return nil, false
	}
	if !e.used {
		t.dropEarly(ctx)
		return nil, false
	}
	t.early = nil
	return e, true
}

// dropEarly gives back an early reservation the attempt never used (it ended before its first
// call: stopped, cancelled, a terminator signal).
func (t *turn) dropEarly(ctx context.Context) {
	if e := t.early; e != nil {
		t.early = nil
		e.closeStream()
		if e.held {
			t.release(ctx, e.callIndex)
		}
	}
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
