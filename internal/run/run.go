// Package run owns run records: their state machine, the lease a worker holds with the run's
// attempt as a fence, terminal transitions with their events, cancellation, and the queue of
// runs waiting behind a conversation's active run. See ARCHITECTURE.md.
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/status"
)

// Kinds of run.
const (
	KindChatTurn = "CHAT_TURN"
	KindTask     = "TASK"
	KindRoutine  = "ROUTINE"
	// KindTeam is a team run (internal/team): RUNNING through the runs of its phases.
	KindTeam = "TEAM"
)

// Status is the status of a run.
type Status = status.Run

// Statuses of a run.
const (
	StatusQueued           Status = "QUEUED"
	StatusRunning          Status = "RUNNING"
	StatusPaused           Status = "PAUSED"
	StatusAwaitingApproval Status = "AWAITING_APPROVAL"
	// StatusWaiting: parked until the run's sub-agents end or its wait times out.
	StatusWaiting   Status = "WAITING"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
	StatusTimedOut  Status = "TIMED_OUT"
)

// ReasonUserCancel is the termination reason of a run the user cancelled.
const ReasonUserCancel = "user_cancel"

// ToolCallStatus is the status of a tool call.
type ToolCallStatus = status.ToolCall

// Statuses of a tool call: PENDING when the model asked for it, RUNNING while it runs, then
// COMPLETED, FAILED, REJECTED (not run: a person or a policy refused it) or CANCELLED (its
// run was cancelled first).
const (
	ToolCallPending   ToolCallStatus = "PENDING"
	ToolCallRunning   ToolCallStatus = "RUNNING"
	ToolCallCompleted ToolCallStatus = "COMPLETED"
	ToolCallFailed    ToolCallStatus = "FAILED"
	ToolCallRejected  ToolCallStatus = "REJECTED"
	ToolCallCancelled ToolCallStatus = "CANCELLED"
)

// IsTerminal reports whether s is final.
func IsTerminal(s Status) bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut:
		return true
	}
	return false
}

// Queue names.
const (
	// QueueChat works chat turns; it is tuned for pickup latency.
	QueueChat = "chat"
	// QueueMaintenance works the periodic sweeps of every domain (reaper, budgets, approvals,
	// workspace retention); it is named here, below the domains, so each can use it.
	QueueMaintenance = "maintenance"
)

// Args is the River job of a run: ids only; the worker reloads everything from Postgres.
type Args struct {
	TenantID uuid.UUID `json:"tenant_id"`
	RunID    uuid.UUID `json:"run_id"`
	// Prior is how many attempts the run had before this job's (a local attempt that failed,
	// Reschedule): the job's attempt n is the run's attempt Prior+n.
	Prior int32 `json:"prior,omitempty"`
}

// Kind names the job.
func (Args) Kind() string { return "run" }

// Inserter is what runs need of River's client: enqueue and cancel jobs in a transaction, and
// list jobs (the reaper looks for run jobs a worker took and never acquired the run for).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobCancelTx(ctx context.Context, tx pgx.Tx, jobID int64) (*rivertype.JobRow, error)
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
}

var errNotFound = river.ErrNotFound

// ErrFenced means the run was taken over by another attempt (or finished): the caller's lease is
// stale and it must stop without writing.
var ErrFenced = errors.New("run lease lost: a newer attempt owns the run")

// ErrCancelRequested means the run's cancel was requested (cancelRun, an ancestor's cancel, an
// INTERRUPT): its worker starts no more work (InFenceWork, InFenceStep) and ends the run
// CANCELLED.
var ErrCancelRequested = errors.New("run cancel requested: its worker stores nothing more")

// LeaseDuration is how long a lease lasts without renewal; the worker renews it every
// LeaseRenewEvery, and the reaper takes over runs whose lease expired (their worker died).
const (
	LeaseDuration   = 15 * time.Second
	LeaseRenewEvery = 5 * time.Second
)

// Service manages runs.
type Service struct {
	db   *db.DB
	pub  *events.Publisher
	jobs Inserter
	log  *slog.Logger
	// onFinish holds, per run kind, work that must commit with the run's end (a task's status).
	onFinish map[string]FinishHook
	// metrics counts finished runs and reaper takeovers (nil: not counted).
	metrics *metrics.Metrics
	// onCancel holds, per run kind, what cancelling a RUNNING run of the kind adds (a routine
	// run, which no job holds while it waits for its step, ends itself there).
	onCancel map[string]FinishHook
	// onEnqueue holds, per run kind, a job of the kind's own for runs that are not the
	// executor's (a routine run resumed after a pause; a team run, worked through its phases' runs).
	onEnqueue map[string]EnqueueHook
	// workers holds, per run kind, how to lock the runs that work a run of the kind without
	// being its descendants (a team run's phase in flight).
	workers map[string]WorkersHook
	// conversations holds, per run kind, the conversations beyond its own that a run's end
	// locks (a team phase's end ends the team run and hands on its conversation).
	conversations map[string]ConversationsHook
	// local works new chat turns in this process (nil: every run goes through River).
	local Local
	// cancelled tells the process working a locally claimed run that its cancel was requested
	// (nil: its worker sees the request at its next step).
	cancelled func(runID uuid.UUID)
}

// ConversationsHook returns the conversations beyond its own that the end of run r may lock
// (the conversation of the team run a phase works), outermost first. Every transaction that
// ends r or controls it locks them before its own conversation and any run (lockConversations):
// conversations first, then runs.
type ConversationsHook func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) ([]uuid.UUID, error)

// OnConversations registers the conversations hook of a run kind. Call it while wiring, before
// runs start.
func (s *Service) OnConversations(kind string, h ConversationsHook) {
	if s.conversations == nil {
		s.conversations = map[string]ConversationsHook{}
	}
	s.conversations[kind] = h
}

// WorkersHook locks in tx, with RunGetForUpdate, the runs that work run r without being its
// descendants (a team run's phase in flight), and returns them as locked. A transaction that
// controls r (cancel, stop, pause, resume, interrupt) calls it after r's conversations and
// before it locks r: the order in which such a run's own end locks them (conversations, then
// child, then parent), so the two never wait for each other.
type WorkersHook func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) ([]dbsqlc.Run, error)

// OnWorkers registers the workers hook of a run kind. Stop, pause and resume of a run of the
// kind are passed on to its workers. Call it while wiring, before runs start.
func (s *Service) OnWorkers(kind string, h WorkersHook) {
	if s.workers == nil {
		s.workers = map[string]WorkersHook{}
	}
	s.workers[kind] = h
}

// lockWorkers is what a control of run id locks before the run itself: the conversations its
// end locks (lockConversations), then its workers when its kind has a workers hook (returned;
// none: nil).
func (s *Service) lockWorkers(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID) ([]dbsqlc.Run, error) {
	w, _, err := s.lock(ctx, tx, tenantID, id, false)
	return w, err
}

// lockTree is what a control that cascades to run id's descendants (cancel, stop, interrupt)
// locks before the run itself: the conversations the run's end locks, its descendants'
// conversations (ConversationDescendantsForUpdate), its workers, then its descendants
// (lockDescendants). Conversations come before every run, as in every transaction that ends a
// run: a descendant's worker locks its conversation before its run, and its end locks its run
// before its parent's.
func (s *Service) lockTree(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID) (workers, desc []dbsqlc.Run, err error) {
	return s.lock(ctx, tx, tenantID, id, true)
}

func (s *Service) lock(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID, tree bool) (workers, desc []dbsqlc.Run, err error) {
	r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: id})
	if db.IsNoRows(err) {
		return nil, nil, nil // the caller answers NOT_FOUND when it locks the run
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load run %s: %w", id, err)
	}
	if err := s.lockConversations(ctx, tx, r); err != nil {
		return nil, nil, err
	}
	if tree {
		if _, err := tx.Q.ConversationDescendantsForUpdate(ctx, dbsqlc.ConversationDescendantsForUpdateParams{TenantID: tenantID, ID: id}); err != nil {
			return nil, nil, fmt.Errorf("lock the conversations of run %s's descendants: %w", id, err)
		}
	}
	if workers, err = s.lockHookWorkers(ctx, tx, r); err != nil {
		return nil, nil, err
	}
	if tree {
		if desc, err = s.lockDescendants(ctx, tx, tenantID, id); err != nil {
			return nil, nil, err
		}
	}
	return workers, desc, nil
}

// lockHookWorkers locks the workers of run r when its kind has a workers hook (none: nil).
func (s *Service) lockHookWorkers(ctx context.Context, tx *db.Tx, r dbsqlc.Run) ([]dbsqlc.Run, error) {
	id := r.ID
	h := s.workers[r.Kind]
	if h == nil {
		return nil, nil
	}
	w, err := h(ctx, tx, r)
	if err != nil {
		return nil, fmt.Errorf("lock the runs that work run %s: %w", id, err)
	}
	return w, nil
}

// OnCancel registers what cancelling a RUNNING run of a kind adds, in the cancel's transaction
// after the cancel was requested. Call it while wiring, before runs start.
func (s *Service) OnCancel(kind string, h FinishHook) {
	if s.onCancel == nil {
		s.onCancel = map[string]FinishHook{}
	}
	s.onCancel[kind] = h
}

// EnqueueHook may enqueue a run's work itself (a routine run's own job rather than the
// executor's); handled says it did.
type EnqueueHook func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (handled bool, err error)

// OnEnqueue registers the enqueue hook of a run kind. Call it while wiring, before runs start.
func (s *Service) OnEnqueue(kind string, h EnqueueHook) {
	if s.onEnqueue == nil {
		s.onEnqueue = map[string]EnqueueHook{}
	}
	s.onEnqueue[kind] = h
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithMetrics makes the service count finished runs and reaper takeovers.
func WithMetrics(m *metrics.Metrics) Option { return func(s *Service) { s.metrics = m } }

// WithCancelSignal makes cancels reach the process working a locally claimed run (Local) at
// once: signal is called, after the cancel commits, with the run's id (internal/jobs sends it
// to every working process).
func WithCancelSignal(signal func(runID uuid.UUID)) Option {
	return func(s *Service) { s.cancelled = signal }
}

// FinishHook runs inside the transaction that ends a run of its kind; fin is the finished run.
type FinishHook func(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error

// OnFinish registers the finish hook of a run kind. Call it while wiring, before runs start.
func (s *Service) OnFinish(kind string, h FinishHook) {
	if s.onFinish == nil {
		s.onFinish = map[string]FinishHook{}
	}
	s.onFinish[kind] = h
}

// NewService returns the run service. jobs may be set later with SetInserter (the River client
// needs the workers, which need this service).
func NewService(d *db.DB, pub *events.Publisher, log *slog.Logger, options ...Option) *Service {
	s := &Service{db: d, pub: pub, log: log}
	for _, o := range options {
		o(s)
	}
	return s
}

// SetInserter sets the job inserter. It stays a setter: the River client is built from the
// workers, which need this service, so it exists only after NewService.
func (s *Service) SetInserter(jobs Inserter) { s.jobs = jobs }

// SetLocal makes this process work the new chat turns it takes while l has room (Place). It is a
// setter for the same reason as SetInserter: l works runs through the executor, which needs this
// service.
func (s *Service) SetLocal(l Local) { s.local = l }

// Publisher returns the event publisher.
func (s *Service) Publisher() *events.Publisher { return s.pub }

// ScopeOf returns the event scope of r.
func ScopeOf(r dbsqlc.Run) events.Scope {
	return events.Scope{TenantID: r.TenantID, RunID: r.ID, ConversationID: r.ConversationID.UUID}
}

// FetchCooldown is the least time between two fetches of the chat queue, and between two insert
// notifications of a queue from one River client.
const FetchCooldown = 5 * time.Millisecond

// QueueOf is the River queue of a run kind's jobs.
func QueueOf(kind string) string {
	if kind == KindChatTurn {
		return QueueChat
	}
	return river.QueueDefault
}

// InsertJob inserts in tx, through River's client, the job of run runID and returns the job's
// id (Enqueue records it on the run). Chat turns go to the chat queue.
func (s *Service) InsertJob(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind string, maxAttempts int32) (int64, error) {
	opts := &river.InsertOpts{MaxAttempts: int(maxAttempts), Queue: QueueOf(kind)}
	res, err := s.jobs.InsertTx(ctx, tx.Tx, Args{TenantID: tenantID, RunID: runID}, opts)
	if err != nil {
		return 0, fmt.Errorf("enqueue run %s: %w", runID, err)
	}
	return res.Job.ID, nil
}

// Enqueue inserts r's job in tx, records it on the run and makes r its conversation's active
// run.
func (s *Service) Enqueue(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	if h := s.onEnqueue[r.Kind]; h != nil {
		handled, err := h(ctx, tx, r)
		if err != nil || handled {
			return err
		}
	}
	jobID, err := s.InsertJob(ctx, tx, r.TenantID, r.ID, r.Kind, r.MaxAttempts)
	if err != nil {
		return err
	}
	if err := tx.Q.RunSetJob(ctx, dbsqlc.RunSetJobParams{TenantID: r.TenantID, ID: r.ID, JobID: &jobID}); err != nil {
		return fmt.Errorf("record job of run %s: %w", r.ID, err)
	}
	if r.ConversationID.Valid {
		return tx.Q.ConversationSetActiveRun(ctx, dbsqlc.ConversationSetActiveRunParams{TenantID: r.TenantID, ID: r.ConversationID.UUID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true}})
	}
	return nil
}

// Reopen makes an ended run workable again inside tx, with its events appended: the user chose
// to continue a run that failed, was cancelled or timed out (the rollback question's CONTINUE).
// The run's end is cleared (RunReopen) so that it is QUEUED like any run that has not ended, and
// it then waits its turn as a new message would: its job is enqueued at once when it has no
// conversation or the conversation is idle; otherwise it stays QUEUED without a job behind the
// conversation's active run, which hands over to it when it ends. A run that has not ended is
// CONFLICT.
func (s *Service) Reopen(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, news ...events.New) (dbsqlc.Run, error) {
	r, err := tx.Q.RunReopen(ctx, dbsqlc.RunReopenParams{TenantID: tenantID, ID: runID})
	if db.IsNoRows(err) {
		return r, apperr.New(apperr.Conflict, "the run has not ended; only an ended run can be continued")
	}
	if err != nil {
		return r, fmt.Errorf("reopen run %s: %w", runID, err)
	}
	if _, err := s.pub.Append(ctx, tx, ScopeOf(r), news...); err != nil {
		return r, err
	}
	if r.ConversationID.Valid {
		conv, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: tenantID, ID: r.ConversationID.UUID})
		if err != nil {
			return r, fmt.Errorf("lock conversation: %w", err)
		}
		if conv.ActiveRunID.Valid && conv.ActiveRunID.UUID != r.ID {
			return r, nil // startNext enqueues it when the active run ends
		}
	}
	return r, s.Enqueue(ctx, tx, r)
}

// Lease is a worker's hold on a run: Attempt is the fence every write names.
type Lease struct {
	Run     dbsqlc.Run
	Attempt int32
	Owner   string
}

// Scope is the event scope of the leased run.
func (l Lease) Scope() events.Scope { return ScopeOf(l.Run) }

// Reads is what a worker reads with its acquisition of a run. Queue queues, in the batch whose
// first statement acquires the run, reads keyed by the run alone: they run after the
// acquisition, in its transaction and its round trip. Then runs once they are read, with the new
// lease, in the same transaction; an error from it undoes the acquisition.
type Reads struct {
	Queue func(b *pgx.Batch)
	Then  func(ctx context.Context, tx *db.Tx, l Lease) error
}

// Acquire takes a run for a worker: the attempt is bumped (fencing out any older worker) and
// execution.started stored, by one statement (RunAcquireWithEvents), sent with the worker's
// first reads (one round trip and one transaction instead of several). It returns ErrFenced when
// the run is already terminal, or its current job is not jobID. The lease is the worker's once
// Acquire has returned: the acquisition has committed.
func (s *Service) Acquire(ctx context.Context, tenantID, runID uuid.UUID, owner string, jobID int64, with ...Reads) (Lease, error) {
	var l Lease
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var b pgx.Batch
		acq := s.queueAcquire(ctx, &b, tenantID, runID, owner, jobID, with)
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return fmt.Errorf("acquire run %s: %w", runID, err)
		}
		var err error
		l, err = acq.done(ctx, tx)
		return err
	})
	return l, err
}

// acquisition is an acquisition of a run queued in a batch (queueAcquire); done takes its
// result once the batch was read.
type acquisition struct {
	s     *Service
	owner string
	with  []Reads
	now   time.Time
	got   dbsqlc.RunAcquireWithEventsRow
	found bool
}

// queueAcquire queues in b the statement that acquires run runID for owner as jobID's (0: no
// job, a run claimed by this process) and the reads of with.
func (s *Service) queueAcquire(ctx context.Context, b *pgx.Batch, tenantID, runID uuid.UUID, owner string, jobID int64, with []Reads) *acquisition {
	// execution.started (and task.started on the first attempt) is stored by the statement
	// that acquires the run; the same events are published once the transaction commits.
	a := &acquisition{s: s, owner: owner, with: with, now: time.Now()}
	dbsqlc.QueueMaybe(b, func(q *dbsqlc.Queries) (dbsqlc.RunAcquireWithEventsRow, error) {
		return q.RunAcquireWithEvents(ctx, dbsqlc.RunAcquireWithEventsParams{TenantID: tenantID, ID: runID, Owner: owner,
			LeaseSeconds: LeaseDuration.Seconds(), JobID: jobID, CreatedAt: a.now.UTC(), StartedType: events.ExecutionStarted, FirstType: events.TaskStarted})
	}, &a.got, &a.found)
	for _, w := range with {
		if w.Queue != nil {
			w.Queue(b)
		}
	}
	return a
}

// done is the lease the batch took (ErrFenced when it took none), its events published once tx
// commits, after the reads' Then has run in tx.
func (a *acquisition) done(ctx context.Context, tx *db.Tx) (Lease, error) {
	if !a.found {
		return Lease{}, ErrFenced
	}
	r := dbsqlc.Run(a.got)
	l := Lease{Run: r, Attempt: r.Attempt, Owner: a.owner}
	started, err := events.Encode(l.Scope(), a.now, StartedEvents(r.Kind, r.Attempt)...)
	if err != nil {
		return l, err
	}
	a.s.pub.Stored(ctx, tx, started, r.LastSeq)
	for _, w := range a.with {
		if w.Then != nil {
			if err := w.Then(ctx, tx, l); err != nil {
				return l, err
			}
		}
	}
	return l, nil
}

// StartedEvents are the events an attempt's acquisition stores: execution.started, and on the
// first attempt task.started (RunAcquireWithEvents stores the same).
func StartedEvents(kind string, attempt int32) []events.New {
	news := []events.New{{Type: events.ExecutionStarted, Data: map[string]any{"attempt": attempt, "kind": kind}}}
	if attempt == 1 {
		news = append(news, events.New{Type: events.TaskStarted, Data: map[string]any{"kind": kind}})
	}
	return news
}

// InFence runs fn in a transaction that first checks (and locks) the lease: when the run's
// attempt moved on, fn does not run and ErrFenced is returned.
func (s *Service) InFence(ctx context.Context, l Lease, fn func(ctx context.Context, tx *db.Tx) error) error {
	return s.inFence(ctx, l, false, false, fn)
}

// InFenceConversation is InFence for a transaction that writes the run's conversation (a
// message at its next position) or may end the run (FinishTx): it locks the conversations the
// run's end locks first (lockConversations), then the lease. That is the lock order of every
// transaction that ends a run, of the controls of a run and of sendMessage's interrupt (the
// conversation, then its active run's workers, then the run), so none of them waits for another
// while holding what the other waits for.
func (s *Service) InFenceConversation(ctx context.Context, l Lease, fn func(ctx context.Context, tx *db.Tx) error) error {
	return s.inFence(ctx, l, true, false, fn)
}

// InFenceWork is InFenceConversation for a transaction that stores new work of the run (a
// parallel step's results): it is refused with ErrCancelRequested once the run's cancel was
// requested. The cancel locks the run's row, so it commits either before the lease is locked
// here (refused) or after this transaction (which it then ends): no work of a cancelled run is
// stored after its cancel committed. A model's reply is the record of a call already made and
// is stored all the same (InFenceConversation).
func (s *Service) InFenceWork(ctx context.Context, l Lease, fn func(ctx context.Context, tx *db.Tx) error) error {
	return s.inFence(ctx, l, true, true, fn)
}

// InFenceStep is InFenceWork for a transaction in which a step's tools run: it takes the lease
// alone (the conversation's row lock would hold back every message sent to the conversation
// until the step ends) and is refused with ErrCancelRequested once the run's cancel was
// requested.
func (s *Service) InFenceStep(ctx context.Context, l Lease, fn func(ctx context.Context, tx *db.Tx) error) error {
	return s.inFence(ctx, l, false, true, fn)
}

// inFence runs fn in a transaction that locks the conversations the run's end locks first when
// conversations is set, then the lease (fence), refusing a run whose cancel was requested when
// work is set.
func (s *Service) inFence(ctx context.Context, l Lease, conversations, work bool, fn func(ctx context.Context, tx *db.Tx) error) error {
	return s.db.InTx(ctx, l.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if conversations {
			if err := s.lockConversations(ctx, tx, l.Run); err != nil {
				return err
			}
		}
		r, err := lockLease(ctx, tx, l)
		if err != nil {
			return err
		}
		if work && r.CancelRequested {
			return ErrCancelRequested
		}
		return fn(ctx, tx)
	})
}

// lockLease checks and locks the lease in tx (ErrFenced when its attempt moved on).
func lockLease(ctx context.Context, tx *db.Tx, l Lease) (dbsqlc.Run, error) {
	r, err := tx.Q.RunFence(ctx, dbsqlc.RunFenceParams{TenantID: l.Run.TenantID, ID: l.Run.ID, Attempt: l.Attempt})
	if db.IsNoRows(err) {
		return r, ErrFenced
	}
	if err != nil {
		return r, fmt.Errorf("fence run %s: %w", l.Run.ID, err)
	}
	return r, nil
}

// lockConversations takes the row locks of the conversations run r's end locks: those of its
// kind's conversations hook (a team phase's: the team run's), then r's own (none for a run
// without one).
func (s *Service) lockConversations(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	var ids []uuid.UUID
	if h := s.conversations[r.Kind]; h != nil {
		var err error
		if ids, err = h(ctx, tx, r); err != nil {
			return fmt.Errorf("conversations of run %s: %w", r.ID, err)
		}
	}
	if r.ConversationID.Valid {
		ids = append(ids, r.ConversationID.UUID)
	}
	for _, id := range ids {
		// One the actor cannot see is not locked: the control is decided on the run.
		if _, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: r.TenantID, ID: id}); err != nil && !db.IsNoRows(err) {
			return fmt.Errorf("lock conversation %s: %w", id, err)
		}
	}
	return nil
}

// Outcome is how a run ended.
type Outcome struct {
	Status            Status // COMPLETED, FAILED, CANCELLED or TIMED_OUT
	FailureClass      string // for FAILED
	Error             string
	TerminationReason string
	Data              map[string]any // extra fields of the terminal event
}

// Finish ends the leased run: open tool calls get a result (cancelled), the terminal status and
// its events are written, and the conversation's next queued run (if any) is enqueued, all in
// one fenced transaction.
func (s *Service) Finish(ctx context.Context, l Lease, o Outcome) (dbsqlc.Run, error) {
	var out dbsqlc.Run
	err := s.db.InTx(ctx, l.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
		// The conversations first, like InFenceConversation: then the run's end (its row, its hand-off).
		if err := s.lockConversations(ctx, tx, l.Run); err != nil {
			return err
		}
		var err error
		out, err = s.finish(ctx, tx, l.Run, l.Attempt, o, true, l.Run.ConversationID.Valid)
		return err
	})
	return out, err
}

// FinishTx is Finish inside the caller's transaction, which must hold the conversations' row
// locks and the lease, in that order (InFenceConversation: the lock order of every transaction that
// ends a run): the executor ends a run in the transaction that stores its last reply.
func (s *Service) FinishTx(ctx context.Context, tx *db.Tx, l Lease, o Outcome) (dbsqlc.Run, error) {
	return s.finish(ctx, tx, l.Run, l.Attempt, o, true, true)
}

// finish ends run r in tx; next hands its conversation on, locked says tx holds the
// conversation's row lock already.
func (s *Service) finish(ctx context.Context, tx *db.Tx, r dbsqlc.Run, attempt int32, o Outcome, next, locked bool) (dbsqlc.Run, error) {
	if _, err := tx.Q.ToolCallCancelOpen(ctx, dbsqlc.ToolCallCancelOpenParams{TenantID: r.TenantID, RunID: r.ID, Reason: "run ended: " + string(o.Status)}); err != nil {
		return r, fmt.Errorf("close tool calls: %w", err)
	}
	fin, err := tx.Q.RunFinish(ctx, dbsqlc.RunFinishParams{
		TenantID: r.TenantID, ID: r.ID, Attempt: attempt, Status: string(o.Status),
		FailureClass: nilIfEmpty(o.FailureClass), Error: nilIfEmpty(o.Error), TerminationReason: nilIfEmpty(o.TerminationReason),
	})
	if db.IsNoRows(err) {
		return r, ErrFenced
	}
	if err != nil {
		return r, fmt.Errorf("finish run %s: %w", r.ID, err)
	}
	if fin.Status != o.Status {
		// Its cancel was requested while it finished: it ends CANCELLED (RunFinish).
		o.Status, o.TerminationReason = fin.Status, ReasonUserCancel
	}
	tx.AfterCommit(func() { s.metrics.RunFinished(fin.Kind, string(fin.Status), time.Since(fin.CreatedAt)) })
	data := map[string]any{"status": o.Status}
	if o.TerminationReason != "" {
		data["terminationReason"] = o.TerminationReason
	}
	if o.Error != "" {
		data["error"] = o.Error
	}
	if o.FailureClass != "" {
		data["failureClass"] = o.FailureClass
	}
	for k, v := range o.Data {
		data[k] = v
	}
	data["inputTokens"], data["outputTokens"], data["costMicros"] = fin.InputTokens, fin.OutputTokens, fin.CostMicros
	var news []events.New
	switch o.Status {
	case StatusCompleted:
		// The terminal event comes last, as in the other outcomes: a run subscription ends at it.
		news = []events.New{{Type: events.TaskCompleted, Data: data}, {Type: events.ExecutionCompleted, Data: data}}
	case StatusCancelled:
		news = []events.New{{Type: events.TaskFailed, Data: data}, {Type: events.ExecutionCancelled, Data: data}}
	case StatusTimedOut:
		news = []events.New{{Type: events.TaskFailed, Data: data}, {Type: events.ExecutionTimedOut, Data: data}}
	default:
		news = []events.New{{Type: events.TaskFailed, Data: data}, {Type: events.ExecutionFailed, Data: data}}
	}
	// The hook runs first so that the events it writes (state.committed, a rollback question)
	// come before the terminal event, at which a run subscription ends.
	if h := s.onFinish[fin.Kind]; h != nil {
		if err := h(ctx, tx, fin); err != nil {
			return fin, fmt.Errorf("finish hook of %s: %w", fin.Kind, err)
		}
	}
	if _, err := s.pub.Append(ctx, tx, ScopeOf(fin), news...); err != nil {
		return fin, err
	}
	if next && fin.ConversationID.Valid {
		if err := s.startNext(ctx, tx, fin, locked); err != nil {
			return fin, err
		}
	}
	return fin, nil
}

// startNext hands the conversation to its oldest queued run, or marks it idle. locked says tx
// holds the conversation's row lock already; else it is taken first, so that the hand-off sees
// every run queued behind.
func (s *Service) startNext(ctx context.Context, tx *db.Tx, done dbsqlc.Run, locked bool) error {
	convID := done.ConversationID.UUID
	if !locked {
		if _, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: done.TenantID, ID: convID}); err != nil {
			return fmt.Errorf("lock conversation: %w", err)
		}
	}
	active, err := tx.Q.ConversationHandOff(ctx, dbsqlc.ConversationHandOffParams{TenantID: done.TenantID, ID: convID, DoneRunID: done.ID})
	if db.IsNoRows(err) {
		return nil // another run is active already
	}
	if err != nil {
		return fmt.Errorf("hand the conversation on: %w", err)
	}
	if !active.Valid {
		return nil // idle: nothing was queued behind
	}
	// A run was queued behind: lock it and give it its job (a cancel may have ended it meanwhile).
	next, err := tx.Q.RunNextQueued(ctx, dbsqlc.RunNextQueuedParams{TenantID: done.TenantID, ConversationID: done.ConversationID})
	if db.IsNoRows(err) {
		return tx.Q.ConversationSetActiveRun(ctx, dbsqlc.ConversationSetActiveRunParams{TenantID: done.TenantID, ID: convID})
	}
	if err != nil {
		return fmt.Errorf("next queued run: %w", err)
	}
	return s.Enqueue(ctx, tx, next)
}

// Cancel stops a run now. A queued run ends CANCELLED at once; a running one has its job
// cancelled through River, which cancels the worker's context wherever it runs (a run claimed
// by the process that took its message, which has no job, is signalled: WithCancelSignal): the
// worker then closes the model stream and records CANCELLED. A run that has ended is CONFLICT.
func (s *Service) Cancel(ctx context.Context, runID uuid.UUID) (dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Run{}, err
	}
	var out dbsqlc.Run
	err = s.db.InTxRetry(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		// The conversations its end locks and its descendants' first, then the runs that work
		// it (a team run's phase in flight), which its finish hook cancels, then its
		// descendants (lockTree).
		_, desc, err := s.lockTree(ctx, tx, a.TenantID, runID)
		if err != nil {
			return err
		}
		r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: a.TenantID, ID: runID})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("run")
		}
		if err != nil {
			return err
		}
		if err := MayControl(ctx, tx, a, r, "cancel"); err != nil {
			return err
		}
		if IsTerminal(r.Status) {
			return endedError(r)
		}
		if err := s.cancelTx(ctx, tx, r, "cancelled by the user", true); err != nil {
			return err
		}
		return s.cancelDescendants(ctx, tx, desc)
	})
	if err != nil {
		return out, err
	}
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: a.TenantID, ID: runID})
		return err
	})
	return out, err
}

// cancelTx cancels r (locked by the caller) inside tx.
// next says whether the conversation moves on to its next queued run.
func (s *Service) cancelTx(ctx context.Context, tx *db.Tx, r dbsqlc.Run, reason string, next bool) error {
	if IsTerminal(r.Status) {
		return nil
	}
	if _, err := tx.Q.RunRequestCancel(ctx, dbsqlc.RunRequestCancelParams{TenantID: r.TenantID, ID: r.ID}); err != nil {
		return err
	}
	if r.JobID != nil {
		if _, err := s.jobs.JobCancelTx(ctx, tx.Tx, *r.JobID); err != nil && !errors.Is(err, errNotFound) {
			return fmt.Errorf("cancel job of run %s: %w", r.ID, err)
		}
	}
	if r.Status == StatusRunning {
		if h := s.onCancel[r.Kind]; h != nil {
			return h(ctx, tx, r)
		}
		if r.LeaseExpiresAt != nil {
			s.signalCancel(tx, r)
			return nil // the worker records the end
		}
	}
	// Nobody works the run (queued, parked, or a team run, RUNNING through its phases with no
	// lease of its own): end it here.
	_, err := s.finish(ctx, tx, r, r.Attempt, Outcome{Status: StatusCancelled, TerminationReason: ReasonUserCancel, Error: reason}, next, false)
	return err
}

// CancelTx cancels run r (locked by the caller with RunGetForUpdate) inside tx, as cancelRun
// does: a running one through River's JobCancelTx (its worker records CANCELLED), any other
// ended here. A run that has ended is left as it is. A team run cancels its phase in flight so.
func (s *Service) CancelTx(ctx context.Context, tx *db.Tx, r dbsqlc.Run, reason string) error {
	return s.cancelTx(ctx, tx, r, reason, true)
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Interrupt ends what a conversation is doing for a new message (sendMessage with INTERRUPT),
// inside tx, which holds the conversation's row lock: every run queued behind the active one
// ends CANCELLED now, and so does the active run when no worker holds it (the conversation is
// then idle). A RUNNING active run has its cancel requested and stays active until its worker
// records the end, which hands the conversation to the new run queued behind it: busy says so.
// Concurrent interrupts are serialised by the lock, so of several sent at once only the last
// message's run survives, and no two runs of the conversation run at once. a must be allowed
// to control every run it ends (MayControl).
func (s *Service) Interrupt(ctx context.Context, tx *db.Tx, a auth.Actor, conv dbsqlc.Conversation, reason string) (busy bool, err error) {
	if !conv.ActiveRunID.Valid {
		return false, nil
	}
	_, desc, err := s.lockTree(ctx, tx, conv.TenantID, conv.ActiveRunID.UUID)
	if err != nil {
		return false, err
	}
	r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: conv.TenantID, ID: conv.ActiveRunID.UUID})
	if err != nil {
		return false, fmt.Errorf("load active run: %w", err)
	}
	if err := MayControl(ctx, tx, a, r, "interrupt"); err != nil {
		return false, err
	}
	queued, err := tx.Q.RunListQueuedBehind(ctx, dbsqlc.RunListQueuedBehindParams{TenantID: conv.TenantID, ConversationID: uuid.NullUUID{UUID: conv.ID, Valid: true}})
	if err != nil {
		return false, fmt.Errorf("runs queued behind: %w", err)
	}
	for _, q := range queued {
		if err := MayControl(ctx, tx, a, q, "interrupt"); err != nil {
			return false, err
		}
		if err := s.cancelTx(ctx, tx, q, reason, false); err != nil {
			return false, err
		}
	}
	if err := s.cancelTx(ctx, tx, r, reason, false); err != nil {
		return false, err
	}
	if err := s.cancelDescendants(ctx, tx, desc); err != nil {
		return false, err
	}
	if r.Status == StatusRunning {
		return true, nil
	}
	return false, tx.Q.ConversationSetActiveRun(ctx, dbsqlc.ConversationSetActiveRunParams{TenantID: conv.TenantID, ID: conv.ID})
}

// lockDescendants locks every descendant of run id (its sub-agents, theirs, ...), deepest
// first, and returns them shallowest first. A cascade takes them after their conversations and
// before the run itself (lockTree): a child's own start and end lock the child's conversation,
// its row, then its parent's, and the same order here means the two never wait for each other.
func (s *Service) lockDescendants(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID) ([]dbsqlc.Run, error) {
	desc, err := tx.Q.RunDescendantsForUpdate(ctx, dbsqlc.RunDescendantsForUpdateParams{TenantID: tenantID, ID: id})
	if err != nil {
		return nil, fmt.Errorf("lock descendants of run %s: %w", id, err)
	}
	slices.Reverse(desc)
	return desc, nil
}

// cancelDescendants cancels runs (locked by lockDescendants, shallowest first) whose ancestor
// was cancelled or stopped in tx: each that has not ended is cancelled like cancelRun does (a
// running one through River's JobCancelTx, any other ended here), in the same transaction, so
// no model call of theirs starts after it commits. Each is re-read first: ending one may have
// changed the next (a child's end resumes a waiting parent).
func (s *Service) cancelDescendants(ctx context.Context, tx *db.Tx, desc []dbsqlc.Run) error {
	for _, d := range desc {
		r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: d.TenantID, ID: d.ID})
		if err != nil {
			return fmt.Errorf("reload descendant run %s: %w", d.ID, err)
		}
		if err := s.cancelTx(ctx, tx, r, "cancelled with its parent run", true); err != nil {
			return err
		}
	}
	return nil
}

// CancelTree cancels run id and its descendants in a transaction of the run's tenant, with no
// caller: the sub-agent dispatcher cancels the sub-agents left running under a parent that has
// ended. A run that has ended already is left as it is (its descendants are still cancelled).
func (s *Service) CancelTree(ctx context.Context, tenantID, id uuid.UUID, reason string) error {
	return s.db.InTxRetry(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		_, desc, err := s.lockTree(ctx, tx, tenantID, id)
		if err != nil {
			return err
		}
		r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if err := s.cancelTx(ctx, tx, r, reason, true); err != nil {
			return err
		}
		return s.cancelDescendants(ctx, tx, desc)
	})
}
