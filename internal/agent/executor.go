// Package agent is the executor: it works a run by calling the model, streaming its reply to
// subscribers, executing the tools it calls and feeding their results back, until the model
// stops or a limit ends the run. Every step is persisted as it completes, so a retried job
// continues after the last persisted turn. See ARCHITECTURE.md.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// MaxChatTurns is how many model calls (LLM<->tool turns) one chat message may take.
const MaxChatTurns = 10

// Models resolves "provider:model" references.
type Models interface {
	Resolve(ref string) (llm.Provider, llm.Model, error)
}

// ToolCall is one call to execute, with the ids of where it runs.
type ToolCall struct {
	TenantID, ProjectID, UserID, RunID uuid.UUID
	Name                               string
	Args                               json.RawMessage
}

// Tools offers tools to the model and executes their calls. Run executes inside tx, so a tool's
// effects commit together with its result; an error is the tool's failure, fed back to the
// model.
type Tools interface {
	Specs() []llm.ToolSpec
	// Info reports whether a tool exists and whether it only reads.
	Info(name string) (known, readOnly bool)
	Risk(name string, args json.RawMessage) int
	Run(ctx context.Context, tx *db.Tx, call ToolCall) (string, error)
}

// Executor works runs.
type Executor struct {
	db     *db.DB
	runs   *run.Service
	pub    *events.Publisher
	models Models
	tools  Tools
	log    *slog.Logger
	// MaxTurns overrides MaxChatTurns when positive (tests).
	MaxTurns  int
	hooks     map[string]KindHooks
	approvals Approvals
	budgets   Budgets
	now       func() time.Time
	retryBase time.Duration
	// window fits each request into the model's context (nil: the whole history is sent).
	window *contextwin.Manager
}

// SetApprovals connects human-in-the-loop approvals.
func (e *Executor) SetApprovals(a Approvals) { e.approvals = a }

// SetClock replaces the clock of the duration limit (tests).
func (e *Executor) SetClock(now func() time.Time) { e.now = now }

func (e *Executor) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// Register adds the hooks of a run kind. Call it while wiring, before runs start.
func (e *Executor) Register(kind string, h KindHooks) {
	if e.hooks == nil {
		e.hooks = map[string]KindHooks{}
	}
	e.hooks[kind] = h
}

// New returns an executor.
func New(d *db.DB, runs *run.Service, models Models, tools Tools, log *slog.Logger) *Executor {
	return &Executor{db: d, runs: runs, pub: runs.Publisher(), models: models, tools: tools, log: log}
}

// Attempt tells the executor about the job attempt it runs in.
type Attempt struct {
	Number, Max int
	// Owner identifies the worker (for the lease).
	Owner string
	// JobID is the River job; only the run's current job may work it.
	JobID int64
}

// Limits bound one run. Zero fields mean no limit.
type Limits struct {
	// MaxTurns is the most model calls the run may make.
	MaxTurns int
	// MaxDuration bounds the run's wall-clock time from its first start.
	MaxDuration time.Duration
	// ConfirmAfter pauses the run for the user's confirmation (an approval of kind "continue")
	// every this many turns.
	ConfirmAfter int
}

// KindHooks is what a kind of run (a task run, ...) adds to the executor: its limits and what
// happens when it starts. (Work that commits with the run's end is a run.FinishHook.)
type KindHooks interface {
	Limits(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (Limits, error)
	Started(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error
}

// Retry asks the job system to run the attempt again after (at least) Delay.
type Retry struct {
	Class llm.Class
	Err   error
	Delay time.Duration
	// Fenced is set when the attempt lost its lease: nothing is written, the job just ends.
	Fenced bool
}

func (r *Retry) Error() string { return fmt.Sprintf("retry (%s): %v", r.Class, r.Err) }
func (r *Retry) Unwrap() error { return r.Err }

// ErrCancelled is the context cause the worker sets when the run was cancelled remotely.
var ErrCancelled = errors.New("run cancelled")

// Execute works one attempt of a run. It returns nil when the run reached a terminal state (or
// was already there, or another attempt owns it), a *Retry when the attempt should be retried,
// or another error for a failure that was recorded as terminal.
func (e *Executor) Execute(ctx context.Context, tenantID, runID uuid.UUID, at Attempt) error {
	t := &turn{e: e, at: at}
	lease, confirm, err := e.runs.AcquireEarly(ctx, tenantID, runID, at.Owner, at.JobID, t.preread(tenantID, runID, at), t.preload)
	if errors.Is(err, run.ErrFenced) {
		return nil // already finished or cancelled before we started
	}
	if err != nil {
		return err
	}
	return t.execute(ctx, lease, confirm)
}

// Prepared is a run's first attempt readied in the transaction that inserts the run (Prepare,
// run.PreparedRun), to be worked by ExecutePrepared once that transaction's statements have run.
type Prepared struct {
	t                                *turn
	owner                            string
	tenantID, userID, conversationID uuid.UUID
	content                          string
	runID                            uuid.UUID
	lease                            run.Lease
	acquired                         bool
}

// Prepare readies, for a worker of this process (owner), the first attempt of the run that a
// message (content) of user userID starts in conversation conversationID, in the transaction
// that inserts the run acquired by owner, its job (inserted running, attempted by the same
// owner) and the message. Reads makes the attempt's first reads, keyed by the conversation, in
// the round trip that locks it; Insert, once the run is decided, keeps them with the message
// added and reserves the first model call after the run's statements, with the COMMIT, as
// Execute's acquisition would (preread, preload); Inserted takes the run and the message as
// inserted. sendMessage then needs no transaction of the worker's between a message and its
// model request, nor a round trip of its own for the reservation.
func (e *Executor) Prepare(owner string, tenantID, userID, conversationID uuid.UUID, content string) *Prepared {
	return &Prepared{t: &turn{e: e}, owner: owner, tenantID: tenantID, userID: userID, conversationID: conversationID, content: content}
}

// Owner is the lease owner the run is inserted acquired by.
func (p *Prepared) Owner() string { return p.owner }

// Reads makes the attempt's first reads, keyed by the conversation: preread's but for the
// settings and the conversation (the inserting transaction reads them), the run's tool calls and
// its user's later messages (a run being inserted has none) and its own message (Insert adds
// it). It must go after the statement that locks the conversation, in its batch or later, so
// that it reads what that lock guards.
func (p *Prepared) Reads(ctx context.Context, tx *db.Tx) error {
	t := p.t
	t.pre = &state{}
	reads := []func(context.Context, *db.Tx) error{func(ctx context.Context, tx *db.Tx) (err error) {
		t.pre.hist, err = tx.Q.MessageListContextOfConversation(ctx, dbsqlc.MessageListContextOfConversationParams{TenantID: p.tenantID, ConversationID: p.conversationID})
		return err
	}}
	if t.e.window != nil {
		t.preCtx = &contextwin.Read{}
		reads = append(reads, contextwin.ReadsOfConversation(t.preCtx, p.tenantID, p.userID, p.conversationID, p.content)...)
	}
	return tx.Pipeline(ctx, reads...)
}

// Insert goes on in the transaction once the run is decided and the statements that insert
// the job, the run and the message are registered with tx.AtCommit: with what Reads read and
// in.Message added, it keeps the first step's state and registers the first model call's
// reservation after them (preload, with in.Run as the run acquired).
func (p *Prepared) Insert(ctx context.Context, tx *db.Tx, at Attempt, in run.PreparedInsert) error {
	t := p.t
	if t.pre == nil {
		return fmt.Errorf("run %s: the prepared attempt did not read", in.Run.ID)
	}
	t.at, t.set, t.conv = at, in.Settings, in.Conversation
	t.pre.hist = append(t.pre.hist, in.Message)
	p.runID = in.Run.ID
	return t.preload(ctx, tx, run.Lease{Run: in.Run, Attempt: 1, Owner: p.owner})
}

// Inserted goes on with r and m, the run and its message as inserted (their statements ran;
// the commit may still be on its way). A run that was not inserted acquired by p's owner is not
// worked: ExecutePrepared says so.
func (p *Prepared) Inserted(r dbsqlc.Run, m dbsqlc.Message) {
	if r.ID != p.runID || r.Attempt != 1 || r.LeaseOwner == nil || *r.LeaseOwner != p.owner {
		return
	}
	p.lease = run.Lease{Run: r, Attempt: r.Attempt, Owner: p.owner}
	if st := p.t.first; st != nil {
		st.run = r
		if n := len(st.hist); n > 0 && st.hist[n-1].ID == m.ID {
			st.hist[n-1] = m
		}
	}
	p.acquired = true
}

// ExecutePrepared works the attempt p prepared, as Execute does once it has acquired the run:
// confirm reports the commit of the transaction Reads and Insert ran in (db.DB.InTxEarly); until it returns
// nil, only the first model request goes out, and nothing of it is read.
func (e *Executor) ExecutePrepared(ctx context.Context, p *Prepared, confirm func(context.Context) error) error {
	if !p.acquired {
		return fmt.Errorf("run %s: prepared attempt was not inserted acquired by %s", p.runID, p.owner)
	}
	return p.t.execute(ctx, p.lease, confirm)
}

// execute works the attempt once the run is acquired (lease), when confirm says the
// acquisition committed.
func (t *turn) execute(ctx context.Context, lease run.Lease, confirm func(context.Context) error) error {
	e, at := t.e, t.at
	tenantID, runID := lease.Run.TenantID, lease.Run.ID
	workCtx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	// The first model request, reserved by the acquisition, goes out while the acquisition
	// commits; its stream is read only once the commit is confirmed.
	t.prestart(workCtx)
	if err := confirm(context.WithoutCancel(ctx)); err != nil {
		t.dropPrestart()
		return fmt.Errorf("acquire run %s: %w", runID, err)
	}
	log := e.log.With(slog.String("run_id", runID.String()), slog.String("tenant_id", tenantID.String()), slog.Int("attempt", int(lease.Attempt)))
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go e.runs.Heartbeat(hbCtx, lease, func() { lose(run.ErrFenced) })

	t.lease, t.log = lease, log
	res := t.work(workCtx)
	stopHB()
	if errors.Is(context.Cause(workCtx), run.ErrFenced) || (res.retry != nil && res.retry.Fenced) {
		log.InfoContext(ctx, "run taken over by another attempt; stopping without writing")
		return nil
	}
	if res.suspended {
		return nil
	}
	retry := res.retry
	if retry != nil && at.Number < at.Max {
		if err := e.runs.InFence(context.WithoutCancel(ctx), lease, func(ctx context.Context, tx *db.Tx) error {
			cls, msg := string(retry.Class), retry.Err.Error()
			if err := tx.Q.RunSetError(ctx, dbsqlc.RunSetErrorParams{TenantID: tenantID, ID: runID, Attempt: lease.Attempt, FailureClass: &cls, Error: &msg}); err != nil {
				return err
			}
			delay := e.retryDelay(at.Number)
			if retry.Delay > delay {
				delay = retry.Delay
			}
			_, err := e.pub.Append(ctx, tx, lease.Scope(), events.New{Type: events.TaskRetrying, Data: map[string]any{
				"failureClass": retry.Class, "error": msg, "attempt": at.Number, "maxAttempts": at.Max,
				"nextAttemptAt": time.Now().Add(delay).UTC(),
			}})
			return err
		}); err != nil && !errors.Is(err, run.ErrFenced) {
			return err
		}
		return retry
	}
	outcome := res.outcome
	if retry != nil {
		outcome = run.Outcome{Status: run.StatusFailed, FailureClass: string(retry.Class), Error: retry.Err.Error(), TerminationReason: "retries_exhausted"}
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

// Terminal reports a run that failed for good (no retry): the worker tells River to cancel the
// job rather than retry it.
type Terminal struct{ Err error }

func (t *Terminal) Error() string { return "terminal failure: " + t.Err.Error() }
func (t *Terminal) Unwrap() error { return t.Err }

// RetryBase is the first retry delay (doubling after); the worker sets it from
// AGENTRY_RETRY_BASE_DELAY.
func (e *Executor) SetRetryBase(d time.Duration) { e.retryBase = d }

func (e *Executor) retryDelay(attempt int) time.Duration {
	return e.retryBase << max(attempt-1, 0)
}

// preread reads, in the round trip that acquires the run (run.Service.AcquireWith), what the
// attempt needs first and can be read by the run alone: the settings of the run's user, its
// conversation and, on the job's first attempt, the run's state for the first step and the
// context builder's reads (preload keeps them only where nothing can change them before the
// loop starts). A chat turn thus starts
// with one transaction instead of four, and its reads cost no round trip of their own.
func (t *turn) preread(tenantID, runID uuid.UUID, at Attempt) func(ctx context.Context, tx *db.Tx) error {
	return func(ctx context.Context, tx *db.Tx) error {
		reads := []func(context.Context, *db.Tx) error{
			func(ctx context.Context, tx *db.Tx) (err error) {
				t.set, err = settings.ForRun(ctx, tx, tenantID, runID)
				return err
			},
			func(ctx context.Context, tx *db.Tx) (err error) {
				t.conv, err = tx.Q.ConversationGetOfRun(ctx, dbsqlc.ConversationGetOfRunParams{TenantID: tenantID, RunID: runID})
				if db.IsNoRows(err) {
					return nil // a run without a conversation (or none at all: Acquire says which)
				}
				return err
			},
		}
		if at.Number == 1 {
			t.pre = &state{}
			reads = append(reads, stateReads(t.pre, tenantID, runID)...)
			if t.e.window != nil {
				t.preCtx = &contextwin.Read{}
				reads = append(reads, contextwin.ReadsOfRun(t.preCtx, tenantID, runID)...)
			}
		}
		return tx.Pipeline(ctx, reads...)
	}
}

// preload goes on, in the transaction that acquires the run, with what preread read: on a first
// attempt of a kind without hooks, the first step's state and the context builder's text are
// kept, and the first model call is reserved (with the COMMIT).
func (t *turn) preload(ctx context.Context, tx *db.Tx, l run.Lease) error {
	r := l.Run
	st, pre, preCtx := state{}, t.pre, t.preCtx
	t.pre, t.preCtx = nil, nil
	if t.e.hooks[r.Kind] != nil || l.Attempt != 1 {
		return nil
	}
	if pre != nil {
		st = *pre
	} else if err := tx.Pipeline(ctx, stateReads(&st, r.TenantID, r.ID)...); err != nil {
		return err
	}
	st.run = r // the row just acquired
	t.first = &st
	if t.e.window != nil {
		// The context builder's part of the system prompt, built once per attempt (from what
		// preread read, when it did).
		var text string
		if pre != nil && preCtx != nil {
			text = contextwin.Compose(t.conv.Mode, *preCtx)
		} else {
			var err error
			if text, err = t.buildContext(ctx, tx, r, st); err != nil {
				return err
			}
		}
		t.built = &text
	}
	// The first model call's reservation, in this transaction too.
	return t.reserveEarly(ctx, tx, l, st)
}
