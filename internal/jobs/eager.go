package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
)

// Eager works chat turns' jobs in the process that inserts them (run.Eager), the way River's
// producer would have after fetching them: sendMessage inserts the job already running and
// attempted by this process's River client (RiverJobInsertRunning), and its run already
// acquired by this process's worker (claim.Prepare), and the job starts while the transaction
// commits, without River's insert notification, fetch and dispatch (about 0.6 ms of a
// message's time to first token at one turn at a time), nor a transaction of the worker's
// before its first model request. Everything else stays
// River's: the job's row ends as River's completer ends it (completed, retryable at the
// worker's NextRetry, discarded after its last attempt, cancelled), so a retry is fetched by
// any process; a cancel reaches the job through cancelTx (this process at once, others by
// agentry_job_cancel); a process that dies leaves its runs to the reaper (their leases expire)
// like any worker. Places are bounded (at most Slots jobs at once, the rest go through River),
// and Stop lets the jobs finish or cancels them, as River's Stop does.
type Eager struct {
	worker *RunWorker
	exec   riverdriver.Executor
	client string
	log    *slog.Logger
	slots  chan struct{}

	// base is every job's context; a hard stop cancels it with errStopped.
	base   context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	stopped bool
	running map[int64]context.CancelCauseFunc
	wg      sync.WaitGroup
}

// NewEager returns the eager starter of a process that works run jobs with worker, whose River
// client is client: jobs' rows are finished on pool, River's own (asynchronous commit).
// slots bounds the jobs worked at once.
func NewEager(worker *RunWorker, client *river.Client[pgx.Tx], pool *pgxpool.Pool, slots int, log *slog.Logger) *Eager {
	base, cancel := context.WithCancelCause(context.Background())
	return &Eager{
		worker: worker, exec: riverpgxv5.New(pool).GetExecutor(), client: client.ID(), log: log,
		slots: make(chan struct{}, max(slots, 1)), base: base, cancel: cancel, running: map[int64]context.CancelCauseFunc{},
	}
}

// Claim takes a free place, or returns nil when there is none or the process is stopping.
func (e *Eager) Claim() run.EagerClaim {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	select {
	case e.slots <- struct{}{}:
		e.wg.Add(1)
		return &claim{e: e}
	default:
		return nil
	}
}

// Busy is how many places are taken (claimed, or working a job).
func (e *Eager) Busy() int { return len(e.slots) }

// claim is one place: Start or Release, once.
type claim struct {
	e    *Eager
	once sync.Once
	// job and prep are the job Prepare readied (nil before).
	job  *river.Job[run.Args]
	prep *agent.Prepared
}

func (c *claim) Client() string { return c.e.client }

// Prepare readies the job's first attempt in the transaction inserting it (agent.Prepare).
func (c *claim) Prepare(tenantID, userID, conversationID uuid.UUID, content string) run.PreparedRun {
	c.prep = c.e.worker.exec.Prepare(c.e.worker.owner, tenantID, userID, conversationID, content)
	return preparedJob{c}
}

// preparedJob is the claim's prepared attempt: Insert makes the job it is worked as.
type preparedJob struct{ c *claim }

func (p preparedJob) Owner() string { return p.c.prep.Owner() }

func (p preparedJob) Reads(ctx context.Context, tx *db.Tx) error { return p.c.prep.Reads(ctx, tx) }

func (p preparedJob) Insert(ctx context.Context, tx *db.Tx, in run.PreparedInsert) error {
	c := p.c
	if in.Run.JobID == nil {
		return fmt.Errorf("run %s: a prepared run is inserted with its job", in.Run.ID)
	}
	now := time.Now()
	args := run.Args{TenantID: in.Run.TenantID, RunID: in.Run.ID}
	encoded, _ := json.Marshal(args)
	c.job = &river.Job[run.Args]{Args: args, JobRow: &rivertype.JobRow{
		ID: *in.Run.JobID, Attempt: 1, AttemptedAt: &now, AttemptedBy: []string{c.e.client}, CreatedAt: now, EncodedArgs: encoded,
		Kind: run.Args{}.Kind(), MaxAttempts: int(in.Run.MaxAttempts), Priority: 1, Queue: run.QueueChat, ScheduledAt: now,
		State: rivertype.JobStateRunning,
	}}
	return c.prep.Insert(ctx, tx, c.e.worker.attempt(c.job), in)
}

func (p preparedJob) Inserted(r dbsqlc.Run, m dbsqlc.Message) { p.c.prep.Inserted(r, m) }

func (c *claim) Release() { c.once.Do(c.e.release) }

// Start works the prepared job; confirm reports the commit of the transaction that inserted it.
// The job's attempt calls confirm first (its first call reads the commit's outcome and runs
// what goes after it: db.DB.InTxEarly), so the returned confirm, the caller's, waits until the
// attempt's has returned or the job ended without it. A job not worked leaves confirm to the
// caller alone.
func (c *claim) Start(confirm func(context.Context) error) func(context.Context) error {
	first := make(chan struct{})
	firstDone := sync.OnceFunc(func() { close(first) })
	worked := false
	c.once.Do(func() {
		e, job, prep := c.e, c.job, c.prep
		if job == nil {
			// Never inserted (its Insert did not run): nothing to work.
			e.log.Error("eager start of a claim whose job was not inserted")
			e.release()
			return
		}
		worked = true
		ctx, cancel := context.WithCancelCause(e.base)
		e.mu.Lock()
		e.running[job.ID] = cancel
		e.mu.Unlock()
		go func() {
			defer func() {
				e.mu.Lock()
				delete(e.running, job.ID)
				e.mu.Unlock()
				cancel(nil)
				e.release()
			}()
			err := e.work(ctx, job, prep, func(ctx context.Context) error {
				defer firstDone()
				return confirm(ctx)
			})
			firstDone() // the attempt ended without confirming: the caller confirms
			e.finish(ctx, job, err)
		}()
	})
	if !worked {
		return confirm
	}
	return func(ctx context.Context) error {
		select {
		case <-first:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return confirm(ctx)
	}
}

// release frees a place.
func (e *Eager) release() {
	<-e.slots
	e.wg.Done()
}

// work runs the job's attempt; a panic is the attempt's error, as in River.
func (e *Eager) work(ctx context.Context, job *river.Job[run.Args], prep *agent.Prepared, confirm func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("run job panicked", slog.Int64("job_id", job.ID), slog.Any("panic", r))
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return e.worker.work(ctx, job, func(ctx context.Context) error { return e.worker.exec.ExecutePrepared(ctx, prep, confirm) })
}

// errStopped is the cause of a hard stop's cancellation (Stop).
var errStopped = errors.New("process stopping")

// schedulerInterval is how often River's scheduler makes retryable jobs available: a retry due
// sooner is made available at once, as River's executor does.
const schedulerInterval = 5 * time.Second

// finish ends the job's row as River's executor and completer would after its attempt returned
// err in ctx: completed; cancelled (river.JobCancel); put back as it was when this process's
// stop interrupted it; discarded after its last attempt; else to be retried at the worker's
// NextRetry (available at once when that is within schedulerInterval). A failure to write the
// row is retried for about a minute (River's completer retries too); the row left running is
// otherwise rescued by River after RescueStuckJobsAfter.
func (e *Eager) finish(ctx context.Context, job *river.Job[run.Args], err error) {
	now := time.Now().UTC()
	var p *riverdriver.JobSetStateIfRunningParams
	var cancelled *river.JobCancelError
	switch {
	case err == nil:
		p = riverdriver.JobSetStateCompleted(job.ID, now, nil)
	case errors.As(err, &cancelled):
		p = riverdriver.JobSetStateCancelled(job.ID, now, attemptError(job, now, err), nil)
	case errors.Is(context.Cause(ctx), errStopped):
		p = riverdriver.JobSetStateInterrupted(job.ID, now, max(job.Attempt-1, 0), nil)
	case job.Attempt >= job.MaxAttempts:
		p = riverdriver.JobSetStateDiscarded(job.ID, now, attemptError(job, now, err), nil)
	default:
		next := e.worker.NextRetry(job).UTC()
		if next.Sub(now) <= schedulerInterval {
			p = riverdriver.JobSetStateErrorAvailable(job.ID, next, attemptError(job, now, err), nil)
		} else {
			p = riverdriver.JobSetStateErrorRetryable(job.ID, next, attemptError(job, now, err), nil)
		}
	}
	many := &riverdriver.JobSetStateIfRunningManyParams{
		ID: []int64{p.ID}, Attempt: []*int{p.Attempt}, ErrData: [][]byte{p.ErrData}, FinalizedAt: []*time.Time{p.FinalizedAt},
		MetadataDoMerge: []bool{p.MetadataDoMerge}, MetadataUpdates: [][]byte{p.MetadataUpdates}, ScheduledAt: []*time.Time{p.ScheduledAt},
		State: []rivertype.JobState{p.State},
	}
	// No row is written when the transaction inserting the job did not commit (the attempt
	// ended with confirm's error): there is nothing to finish.
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, serr := e.exec.JobSetStateIfRunningMany(wctx, many)
		cancel()
		if serr == nil {
			return
		}
		if try == 7 {
			e.log.Error("finish eagerly worked job: giving up (River rescues it later)", slog.Int64("job_id", job.ID), slog.String("state", string(p.State)), slog.Any("error", serr))
			return
		}
		e.log.Warn("finish eagerly worked job", slog.Int64("job_id", job.ID), slog.String("state", string(p.State)), slog.Any("error", serr))
		time.Sleep(wait)
		wait *= 2
	}
}

// attemptError is River's record of a failed attempt (the job's errors column).
func attemptError(job *river.Job[run.Args], at time.Time, err error) []byte {
	b, _ := json.Marshal(rivertype.AttemptError{At: at, Attempt: job.Attempt, Error: err.Error()})
	return b
}

// Cancel cancels the job's attempt if this process works it, as River cancels a job cancelled
// remotely (the worker sees river.ErrJobCancelledRemotely).
func (e *Eager) Cancel(jobID int64) {
	e.mu.Lock()
	cancel := e.running[jobID]
	e.mu.Unlock()
	if cancel != nil {
		cancel(river.ErrJobCancelledRemotely)
	}
}

// Listen cancels this process's eager jobs that another process cancelled (agentry_job_cancel
// in the current schema, RiverNotifyJobCancel)
// until ctx ends, on a connection of its own from pool, reconnecting after a failure; after each
// (re)connection it also cancels those whose row says a cancel was attempted meanwhile.
func (e *Eager) Listen(ctx context.Context, pool *db.DB) {
	for ctx.Err() == nil {
		err := e.listenOnce(ctx, pool)
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("eager job cancel listener", slog.Any("error", err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (e *Eager) listenOnce(ctx context.Context, pool *db.DB) error {
	c, err := pool.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	conn := c.Hijack() // LISTEN state must not go back to the pool
	defer conn.Close(context.Background())
	var channel string
	if err := conn.QueryRow(ctx, "SELECT concat(current_schema(), '.agentry_job_cancel')").Scan(&channel); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	if err := e.cancelAttempted(ctx, conn); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			e.Cancel(id)
		}
	}
}

// cancelAttempted cancels the eager jobs whose rows record a cancel attempt (JobCancelTx).
func (e *Eager) cancelAttempted(ctx context.Context, conn *pgx.Conn) error {
	e.mu.Lock()
	ids := make([]int64, 0, len(e.running))
	for id := range e.running {
		ids = append(ids, id)
	}
	e.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	rows, err := conn.Query(ctx, "SELECT id FROM river_job WHERE id = ANY($1) AND metadata ? 'cancel_attempted_at'", ids)
	if err != nil {
		return err
	}
	cancelled, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	for _, id := range cancelled {
		e.Cancel(id)
	}
	return err
}

// Stop takes no more jobs and waits for those running until ctx ends, then cancels them and
// waits at most hard more for them to end (their rows put back available, for any process to
// take up, as River's StopAndCancel does). It reports whether every job ended.
func (e *Eager) Stop(ctx context.Context, hard time.Duration) bool {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	e.cancel(errStopped)
	select {
	case <-done:
		return true
	case <-time.After(hard):
		return false
	}
}
