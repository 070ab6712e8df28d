package run

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Local works chat turns in the process that takes their message (internal/jobs.Local): that
// process acquires the run in the transaction that creates it, its lease being the claim, and
// works it once that transaction commits, with no job and no trip through River's queue. River
// stays the durable path: a failed attempt is retried through a job (Reschedule), and a run
// whose process died is taken over by the reaper when its lease expires, like any worker's.
type Local interface {
	// Owner names this process in leases.
	Owner() string
	// Ready reports whether the process takes another run now (it has room, and is not stopping).
	Ready() bool
	// Begin prepares the first attempt (of maxAttempts) of run runID: reads go with its
	// acquisition, and start works it once the acquiring transaction has committed. ctx is
	// that transaction's (its trace goes on).
	Begin(ctx context.Context, tenantID, runID uuid.UUID, maxAttempts int32) (reads Reads, start func(Lease))
}

// Place is where a new chat turn is worked: by River (its job, JobID) or by this process
// (Claim, acquired in the transaction that creates the run).
type Place struct {
	JobID *int64
	Claim *Claim
}

// Claim is a new run this process works itself: Queue queues its acquisition in the batch that
// inserts the run, after the insert; Acquired takes the lease once the batch is read, and the
// attempt starts when the transaction commits.
type Claim struct {
	s               *Service
	tenantID, runID uuid.UUID
	reads           Reads
	start           func(Lease)
	acq             *acquisition
}

// Place decides, in tx, where run runID (a new run of kind, not yet inserted) is worked: a chat
// turn is claimed by this process when it works runs and has room (Local); any other run has
// its job inserted. The caller inserts the run (RunInsertWithEvents: job_id) and, for a claim,
// queues its acquisition after the insert (Claim.Queue, Claim.Acquired).
func (s *Service) Place(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind string, maxAttempts int32) (Place, error) {
	if kind == KindChatTurn && s.local != nil && s.local.Ready() {
		reads, start := s.local.Begin(ctx, tenantID, runID, maxAttempts)
		return Place{Claim: &Claim{s: s, tenantID: tenantID, runID: runID, reads: reads, start: start}}, nil
	}
	id, err := s.InsertJob(ctx, tx, tenantID, runID, kind, maxAttempts)
	if err != nil {
		return Place{}, err
	}
	return Place{JobID: &id}, nil
}

// Queue queues in b the acquisition of the claimed run (no job: job id 0) and the first reads
// of its attempt, for the whole tenant to the end of tx (they are the worker's, not the user's).
func (c *Claim) Queue(ctx context.Context, tx *db.Tx, b *pgx.Batch) {
	tx.QueueTenantWideToEnd(ctx, b, "sendMessage: the worker of this process acquires the run it claimed")
	c.acq = c.s.queueAcquire(ctx, b, c.tenantID, c.runID, c.s.local.Owner(), 0, []Reads{c.reads})
}

// Acquired takes the claimed run's lease, once the batch of Queue has been read, and starts its
// attempt when tx commits. It returns the run as acquired (RUNNING, its first attempt).
func (c *Claim) Acquired(ctx context.Context, tx *db.Tx) (dbsqlc.Run, error) {
	l, err := c.acq.done(db.TenantWide(ctx, "the worker's first reads of the run it claimed"), tx)
	if err != nil {
		return l.Run, fmt.Errorf("claim run %s: %w", c.runID, err)
	}
	tx.AfterCommit(func() { c.start(l) })
	return l.Run, nil
}

// Reschedule hands the leased run, whose attempt (the prior'th) failed outside River, to River
// for its next attempt at the given time, inside tx (fenced by the caller): its job is inserted
// with the attempts left and recorded on the run.
func (s *Service) Reschedule(ctx context.Context, tx *db.Tx, l Lease, at time.Time, prior int32) error {
	r := l.Run
	opts := &river.InsertOpts{MaxAttempts: int(max(r.MaxAttempts-prior, 1)), Queue: QueueOf(r.Kind)}
	if at.After(time.Now()) {
		opts.ScheduledAt = at // else available at once (River makes any time given a scheduled job)
	}
	res, err := s.jobs.InsertTx(ctx, tx.Tx, Args{TenantID: r.TenantID, RunID: r.ID, Prior: prior}, opts)
	if err != nil {
		return fmt.Errorf("enqueue the retry of run %s: %w", r.ID, err)
	}
	return tx.Q.RunSetJob(ctx, dbsqlc.RunSetJobParams{TenantID: r.TenantID, ID: r.ID, JobID: &res.Job.ID})
}

// signalCancel tells, once tx commits, the process working run r outside River (no job: a
// claimed run) that its cancel was requested, so that it stops now rather than at its next step.
func (s *Service) signalCancel(tx *db.Tx, r dbsqlc.Run) {
	if r.JobID != nil || s.cancelled == nil {
		return
	}
	tx.AfterCommit(func() { s.cancelled(r.ID) })
}
