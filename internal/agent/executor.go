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
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/run"
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
	// maxTurns overrides MaxChatTurns when positive (WithMaxTurns).
	maxTurns  int
	hooks     map[string]KindHooks
	approvals Approvals
	budgets   Budgets
	waiter    Waiter
	now       func() time.Time
	retryBase time.Duration
	// restricted tools are offered only to runs whose kind names them (Restrict).
	restricted map[string]bool
	// window fits each request into the model's context (nil: the whole history is sent).
	window *contextwin.Manager
	// metrics counts model calls, tokens, cost and tool calls (nil: not counted).
	metrics *metrics.Metrics
	// tracer makes a span of each model call and tool call (a no-op one unless tracing is on).
	tracer trace.Tracer
}

// SetClock replaces the clock of the duration limit while the executor works runs: tests move
// time for a process that is running already (WithClock sets it at construction). Not safe
// while a run is being worked.
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

// New returns an executor working runs with models and tools; options connect what else it
// uses (without them: no approvals, budgets, waits, context window, metrics or tracing, and
// retries without delay).
func New(d *db.DB, runs *run.Service, models Models, tools Tools, log *slog.Logger, options ...Option) *Executor {
	e := &Executor{db: d, runs: runs, pub: runs.Publisher(), models: models, tools: tools, log: log, tracer: noop.NewTracerProvider().Tracer("")}
	for _, o := range options {
		o(e)
	}
	return e
}

// Option configures an Executor at construction (New).
type Option func(*Executor)

// WithApprovals connects human-in-the-loop approvals (without: no call waits for a person, and
// an escalation ends the run FAILED).
func WithApprovals(a Approvals) Option { return func(e *Executor) { e.approvals = a } }

// WithBudgets connects budget enforcement around every model call (without: none).
func WithBudgets(b Budgets) Option { return func(e *Executor) { e.budgets = b } }

// WithWaiter connects waiting steps (without: no tool waits).
func WithWaiter(w Waiter) Option { return func(e *Executor) { e.waiter = w } }

// WithContextWindow connects the context window manager and builder: without one, every
// request carries the whole history and only the agent's own system prompt.
func WithContextWindow(m *contextwin.Manager) Option { return func(e *Executor) { e.window = m } }

// WithMetrics counts model calls, tokens, cost and tool calls on m.
func WithMetrics(m *metrics.Metrics) Option { return func(e *Executor) { e.metrics = m } }

// WithTracer traces model calls and tool calls with tp.
func WithTracer(tp trace.TracerProvider) Option {
	return func(e *Executor) { e.tracer = tp.Tracer("agentry/agent") }
}

// WithRetryBase is the first retry delay of a failed attempt, doubling after (the worker's
// AGENTRY_RETRY_BASE_DELAY).
func WithRetryBase(d time.Duration) Option { return func(e *Executor) { e.retryBase = d } }

// WithClock replaces the clock of the duration limit.
func WithClock(now func() time.Time) Option { return func(e *Executor) { e.now = now } }

// WithMaxTurns overrides MaxChatTurns, the model calls a run without a kind's limits may make,
// when n is positive.
func WithMaxTurns(n int) Option { return func(e *Executor) { e.maxTurns = n } }

// Attempt tells the executor about the job attempt it runs in.
type Attempt struct {
	Number, Max int
	// Owner identifies the worker (for the lease).
	Owner string
	// JobID is the River job; only the run's current job may work it. 0 for a Local attempt.
	JobID int64
	// Local is set when the attempt works a run this process claimed (run.Local) outside River:
	// a retry is handed to River (run.Service.Reschedule) rather than returned to it.
	Local bool
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
	// MaxTokens bounds the run's own input plus output tokens (a sub-agent's max tokens): FAILED
	// budget_exceeded once reached.
	MaxTokens int64
	// TimesOut makes the duration limit end the run TIMED_OUT (else FAILED max_duration).
	TimesOut bool
	// AllowTool, when set, names the tools the run may call: only those are offered to the
	// model, and a call to another fails as unavailable.
	AllowTool func(name string) bool
}

// Waiter parks a run whose step waits for something that has not happened yet (its sub-agents'
// ends): internal/subagent implements it.
type Waiter interface {
	// Waits reports whether a tool's calls may park the run.
	Waits(name string) bool
	// Park decides, inside the fenced tx (the run's row locked), whether call must wait; when it
	// must, it parks the run (status WAITING, the job ends) and reports true.
	Park(ctx context.Context, tx *db.Tx, l run.Lease, call dbsqlc.ToolCall) (bool, error)
}

// KindHooks is what a kind of run (a task run, ...) adds to the executor: its limits and what
// happens when it starts. (Work that commits with the run's end is a run.FinishHook.)
type KindHooks interface {
	Limits(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (Limits, error)
	Started(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error
}

// Restrict makes tools available only to runs whose limits name them (Limits.AllowTool): a
// routine gate's verdict tool has no place in a chat. Call it while wiring, before runs start.
func (e *Executor) Restrict(names ...string) {
	if e.restricted == nil {
		e.restricted = map[string]bool{}
	}
	for _, n := range names {
		e.restricted[n] = true
	}
}

// ToolScope is what KindHooks implement when a kind of run uses other tools than the
// executor's (a team phase: read-only tools for the architect and the reviewer, plus the
// reviewer's submit_review). Tools returns the run's tools given the executor's (base); it runs
// in the transaction that starts the attempt.
type ToolScope interface {
	Tools(ctx context.Context, tx *db.Tx, r dbsqlc.Run, base Tools) (Tools, error)
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

// ErrStopping is the context cause a Local attempt's process sets when it stops: the run is
// handed to River at once, the interrupted attempt not counted (as River does with its jobs).
var ErrStopping = errors.New("the process is stopping")

// Execute works one attempt of a run. It returns nil when the run reached a terminal state (or
// was already there, or another attempt owns it), a *Retry when the attempt should be retried,
// or another error for a failure that was recorded as terminal. The attempt acquires the run
// (its lease commits) before it calls the model.
func (e *Executor) Execute(ctx context.Context, tenantID, runID uuid.UUID, at Attempt) error {
	reads, work := e.Claimed(ctx, tenantID, runID, at)
	lease, err := e.runs.Acquire(ctx, tenantID, runID, at.Owner, at.JobID, reads)
	if errors.Is(err, run.ErrFenced) {
		return nil // already finished or cancelled before we started
	}
	if err != nil {
		return err
	}
	return work(ctx, lease)
}

// Claimed prepares an attempt of run runID acquired elsewhere than in Execute (the process
// that takes a chat turn's message acquires it in the transaction that creates it:
// run.Service.Place): reads go with the acquisition, and work, once it has committed, works the
// attempt under its lease and returns what Execute returns.
func (e *Executor) Claimed(ctx context.Context, tenantID, runID uuid.UUID, at Attempt) (reads run.Reads, work func(ctx context.Context, l run.Lease) error) {
	a := &attempt{e: e, job: at}
	return a.firstReads(ctx, tenantID, runID), a.execute
}

// Terminal reports a run that failed for good (no retry): the worker tells River to cancel the
// job rather than retry it.
type Terminal struct{ Err error }

func (t *Terminal) Error() string { return "terminal failure: " + t.Err.Error() }

func (t *Terminal) Unwrap() error { return t.Err }

func (e *Executor) retryDelay(attempt int) time.Duration {
	return e.retryBase << max(attempt-1, 0)
}
