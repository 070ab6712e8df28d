package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// attempt is one attempt at a run: one River job attempt working the RVR-B loop under the
// run's lease, until the run ends, is parked, or the attempt fails.
type attempt struct {
	e      *Executor
	lease  run.Lease
	log    *slog.Logger
	job    Attempt
	set    settings.Settings
	conv   dbsqlc.Conversation
	limits Limits
	// scoped replaces the executor's tools for this run when its kind's hooks scope them
	// (ToolScope); nil: the executor's. tools() narrows either by the run's AllowTool.
	scoped Tools
	// earlier holds the run's tool failures so far (the classifier looks for repeats).
	earlier []Failure
	// built is the context builder's system-prompt text for this attempt (nil until built).
	built *string
	// first is the state read with the lease (firstReads), for the first load; nil after.
	first *state
	// pre is the first call's budget reservation, made in the transaction that acquired the
	// run (firstReads); the call it was made for uses it, else it is released. nil after.
	pre *preReserved
	// tail is the last token delta of the latest reply, not published yet: it goes out with
	// the transaction that stores the reply (persistReply), else with the next call or at the
	// end of the attempt (flushTail).
	tail *events.Event
}

// result is how an attempt ended: an outcome to record, a retry, or suspended (the run is
// parked waiting for a person and its job simply ends).
type result struct {
	outcome   run.Outcome
	retry     *Retry
	suspended bool
	// finished is set when the outcome was recorded already (with the last reply).
	finished bool
}

func done(o run.Outcome) result { return result{outcome: o} }

// work runs the RVR-B loop: REACT (model call) -> VALIDATE (tool calls) -> REFLECT (classify
// failures) -> BACKTRACK when needed -> TERMINATE? (the adaptive terminator), until the run ends,
// is suspended, or the attempt fails.
func (a *attempt) work(ctx context.Context) result {
	defer a.flushTail(context.WithoutCancel(ctx))
	defer a.releaseUnused(ctx)
	// a.set and a.conv were read with the lease (firstReads).
	if err := a.startKind(ctx); err != nil {
		return a.fromError(ctx, err)
	}
	provider, model, err := a.e.models.Resolve(a.conv.Model)
	if err != nil {
		return done(failed(llm.Terminal, err))
	}
	if r, stop := a.afterEscalation(ctx); stop {
		return r
	}
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeLimit(), errTimeout)
	defer cancel()
	term := AdaptiveTerminator{Limits: a.limits, MaxTokens: a.set.MaxTokensPerTask, Now: a.e.now}

	for {
		if o, ok := a.stopped(ctx); ok {
			return done(o)
		}
		st, err := a.load(ctx)
		if err != nil {
			return a.fromError(ctx, err)
		}
		if r, stop := a.requested(ctx, provider, model, st); stop {
			return r
		}
		// VALIDATE: tool calls stored but not executed yet (this step's, or an earlier attempt's),
		// then REFLECT on the step's failures.
		if pending := pendingCalls(st.calls); len(pending) > 0 {
			if r, stop := a.validateAndReflect(ctx, provider, model, st, pending); stop {
				return r
			}
			continue
		}
		// An earlier attempt may have stored a reply and died before acting on it.
		if last, ok := a.lastReply(st.hist); ok && len(toolUses(last)) == 0 {
			if r, stop := a.storedReply(ctx, st, last); stop {
				return r
			}
			continue
		}
		calls := max(int(st.run.LlmCalls), a.llmCalls(st.hist)) // backtracked turns count too
		if r, stop := a.terminate(ctx, term, provider, model, st, calls); stop {
			return r
		}
		if r, stop := a.react(ctx, provider, model, st, calls); stop {
			return r
		}
		// Tool calls are stored PENDING: the next step runs them (VALIDATE).
	}
}

// startKind sets the run's limits: its kind's (and, when the kind scopes them, its tools),
// else the chat limits; a kind's start is recorded in a fenced transaction.
func (a *attempt) startKind(ctx context.Context) error {
	r := a.lease.Run
	a.limits = Limits{MaxTurns: MaxChatTurns}
	if a.e.maxTurns > 0 {
		a.limits.MaxTurns = a.e.maxTurns
	}
	h := a.e.hooks[r.Kind]
	if h == nil {
		return nil
	}
	return a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		var err error
		if a.limits, err = h.Limits(ctx, tx, r); err != nil {
			return err
		}
		if sc, ok := h.(ToolScope); ok {
			if a.scoped, err = sc.Tools(ctx, tx, r, a.e.tools); err != nil {
				return err
			}
		}
		return h.Started(ctx, tx, r)
	})
}

// timeLimit bounds the attempt: settings.timeoutSeconds bounds a chat-turn attempt; other kinds
// run under their own wall-clock limit (measured from the run's first start), enforced by the
// terminator too.
func (a *attempt) timeLimit() time.Duration {
	r := a.lease.Run
	limit := time.Duration(a.set.TimeoutSeconds) * time.Second
	if r.Kind != run.KindChatTurn && a.limits.MaxDuration > 0 {
		limit = a.limits.MaxDuration
		if r.StartedAt != nil {
			limit -= a.e.clock().Sub(*r.StartedAt)
		}
		limit = max(limit, time.Second)
	}
	return limit
}

// requested acts on what the user asked of the run since the last step: cancel, stop, pause.
func (a *attempt) requested(ctx context.Context, p llm.Provider, m llm.Model, st state) (result, bool) {
	switch {
	case st.run.CancelRequested:
		// Cancelled (maybe with an ancestor) while River's cancel is on its way: no model call
		// starts after the cancel committed.
		return done(run.Outcome{Status: run.StatusCancelled, Error: "cancelled", TerminationReason: run.ReasonUserCancel}), true
	case st.run.StopRequested:
		return a.summarise(ctx, p, m, st, ReasonUserStop, run.StatusCompleted), true
	case st.run.PauseRequested:
		return a.suspend(ctx, run.StatusPaused, events.New{Type: events.ExecutionPaused, Data: map[string]any{"reason": "paused by the user"}}), true
	}
	return result{}, false
}

// validateAndReflect runs the oldest pending step (VALIDATE) and reflects on its failures
// (REFLECT).
func (a *attempt) validateAndReflect(ctx context.Context, p llm.Provider, m llm.Model, st state, pending []dbsqlc.ToolCall) (result, bool) {
	res, stop := a.validate(ctx, pending)
	if stop != nil {
		return *stop, true
	}
	if len(res.failures) == 0 {
		return result{}, false
	}
	return a.reflect(ctx, p, m, st, res)
}

// storedReply acts on the newest reply of the run, stored by an earlier attempt without tool
// calls: the model had stopped, or it was a reflection whose breaker update was not stored.
func (a *attempt) storedReply(ctx context.Context, st state, blocks []llm.Block) (result, bool) {
	if !st.run.MustReflect {
		// The model had stopped on its own: that attempt only missed recording the end.
		return done(run.Outcome{Status: run.StatusCompleted, TerminationReason: ReasonCompleted}), true
	}
	// The reflection turn was stored; its breaker update was not.
	if err := a.endReflection(ctx, st, llm.Message{Blocks: blocks}.Text()); err != nil {
		return a.fromError(ctx, err), true
	}
	return result{}, false
}

// execute works the attempt once the run is acquired (lease).
func (a *attempt) execute(ctx context.Context, lease run.Lease) error {
	e, at := a.e, a.job
	tenantID, runID := lease.Run.TenantID, lease.Run.ID
	workCtx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	log := e.log.With(slog.String("run_id", runID.String()), slog.String("tenant_id", tenantID.String()), slog.Int("attempt", int(lease.Attempt)))
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go e.runs.Heartbeat(hbCtx, lease, func() { lose(run.ErrFenced) })

	a.lease, a.log = lease, log
	res := a.work(workCtx)
	stopHB()
	if errors.Is(context.Cause(workCtx), run.ErrFenced) || (res.retry != nil && res.retry.Fenced) {
		log.InfoContext(ctx, "run taken over by another attempt; stopping without writing")
		return nil
	}
	if res.suspended {
		return nil
	}
	retry := res.retry
	// A local attempt interrupted by its process's stop is not counted (as River does not count
	// a job its stopping client cancelled): the run goes to River at once.
	stopping := at.Local && errors.Is(context.Cause(workCtx), ErrStopping)
	if retry != nil && (at.Number < at.Max || stopping) {
		if err := e.runs.InFence(context.WithoutCancel(ctx), lease, func(ctx context.Context, tx *db.Tx) error {
			cls, msg := string(retry.Class), retry.Err.Error()
			if err := tx.Q.RunSetError(ctx, dbsqlc.RunSetErrorParams{TenantID: tenantID, ID: runID, Attempt: lease.Attempt, FailureClass: &cls, Error: &msg}); err != nil {
				return err
			}
			delay := e.retryDelay(at.Number)
			if retry.Delay > delay {
				delay = retry.Delay
			}
			next := time.Now().Add(delay)
			if at.Local {
				when, prior := next, int32(at.Number)
				if stopping {
					when, prior = time.Now(), prior-1
				}
				if err := e.runs.Reschedule(ctx, tx, lease, when, prior); err != nil {
					return err
				}
			}
			_, err := e.pub.Append(ctx, tx, lease.Scope(), events.New{Type: events.TaskRetrying, Data: map[string]any{
				"failureClass": retry.Class, "error": msg, "attempt": at.Number, "maxAttempts": at.Max,
				"nextAttemptAt": next.UTC(),
			}})
			return err
		}); err != nil && !errors.Is(err, run.ErrFenced) {
			return err
		}
		return retry
	}
	outcome := res.outcome
	if retry != nil {
		outcome = run.Outcome{Status: run.StatusFailed, FailureClass: string(retry.Class), Error: retry.Err.Error(), TerminationReason: ReasonRetriesExhausted}
	}
	if !res.finished || retry != nil {
		if _, err := e.runs.Finish(context.WithoutCancel(ctx), lease, outcome); err != nil && !errors.Is(err, run.ErrFenced) {
			return fmt.Errorf("finish run %s: %w", runID, err)
		}
	}
	if outcome.FailureClass == string(llm.Terminal) {
		return &Terminal{Err: errors.New(outcome.Error)}
	}
	return nil
}

// firstReads reads with the acquisition of run runID (run.Service.Acquire), in its round trip,
// what the attempt needs first: the settings of the run's user, its conversation and, when the
// job's first attempt works it, the run's state for the first step (the kind is not known
// before the acquisition: a kind with hooks, which loads its own state, reads it for nothing).
// Once they are read, on the run's first attempt of a kind without hooks (a chat turn), the
// context builder's text is read and the first call reserved in the same transaction. A chat
// turn thus starts with one transaction instead of three.
func (a *attempt) firstReads(ctx context.Context, tenantID, runID uuid.UUID) run.Reads {
	var (
		set        dbsqlc.AgentSetting
		found, hit bool
		st         *state
	)
	return run.Reads{
		Queue: func(b *pgx.Batch) {
			dbsqlc.QueueMaybe(b, func(q *dbsqlc.Queries) (dbsqlc.AgentSetting, error) {
				return q.AgentSettingsGetForRun(ctx, dbsqlc.AgentSettingsGetForRunParams{TenantID: tenantID, RunID: runID})
			}, &set, &found)
			dbsqlc.QueueMaybe(b, func(q *dbsqlc.Queries) (dbsqlc.Conversation, error) {
				return q.ConversationGetForRun(ctx, dbsqlc.ConversationGetForRunParams{TenantID: tenantID, RunID: runID})
			}, &a.conv, &hit)
			if a.job.Number <= 1 {
				st = queueState(ctx, b, tenantID, runID)
			}
		},
		Then: func(ctx context.Context, tx *db.Tx, l run.Lease) error {
			a.set = settings.Of(set, found)
			if a.e.hooks[l.Run.Kind] != nil || l.Attempt != 1 {
				return nil
			}
			if st == nil { // a later job took the run's first attempt (its job was retried unworked)
				read, err := readStateOf(ctx, tx, l.Run)
				if err != nil {
					return fmt.Errorf("load run %s: %w", runID, err)
				}
				st = &read
			}
			st.run = l.Run
			a.first = st
			if a.e.window != nil {
				text, err := a.buildContext(ctx, tx, l.Run, *st)
				if err != nil {
					return err
				}
				a.built = &text
			}
			return a.reserveFirst(ctx, tx, l, *st)
		},
	}
}

var errTimeout = errors.New("attempt timed out (settings.timeoutSeconds)")

// stopped reports whether ctx ended (cancel, timeout) and the outcome that means.
func (a *attempt) stopped(ctx context.Context) (run.Outcome, bool) {
	if ctx.Err() == nil {
		return run.Outcome{}, false
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		return run.Outcome{Status: run.StatusTimedOut, FailureClass: string(llm.Transient), Error: cause.Error(), TerminationReason: ReasonTimeout}, true
	case errors.Is(cause, ErrCancelled):
		return run.Outcome{Status: run.StatusCancelled, Error: "cancelled by the user", TerminationReason: run.ReasonUserCancel}, true
	default:
		return run.Outcome{}, false // shutdown or lease lost: another attempt goes on
	}
}

// fromError maps an attempt's failure to an outcome or a retry.
func (a *attempt) fromError(ctx context.Context, err error) result {
	if o, ok := a.stopped(ctx); ok {
		return done(o)
	}
	if errors.Is(err, run.ErrFenced) {
		return result{retry: &Retry{Class: llm.Terminal, Err: err, Fenced: true}}
	}
	if errors.Is(err, run.ErrCancelRequested) {
		// Cancelled while River's cancel is on its way: what the attempt did since is dropped.
		return done(run.Outcome{Status: run.StatusCancelled, Error: "cancelled", TerminationReason: run.ReasonUserCancel})
	}
	if o, ok := budgetOutcome(err); ok {
		return done(o)
	}
	if ctx.Err() != nil {
		return result{outcome: failed(llm.Transient, err), retry: &Retry{Class: llm.Transient, Err: err}}
	}
	le := llm.Classify(err)
	if le.Class == llm.Terminal {
		return done(failed(llm.Terminal, err))
	}
	return result{outcome: failed(le.Class, err), retry: &Retry{Class: le.Class, Err: err, Delay: le.RetryAfter}}
}

func failed(c llm.Class, err error) run.Outcome {
	return run.Outcome{Status: run.StatusFailed, FailureClass: string(c), Error: err.Error(), TerminationReason: ReasonError}
}
