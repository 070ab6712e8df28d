package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// Heartbeat renews l's lease every LeaseRenewEvery until ctx ends. When the lease is lost (the
// reaper or a newer attempt took the run) it calls lost once and returns.
func (s *Service) Heartbeat(ctx context.Context, l Lease, lost func()) {
	t := time.NewTicker(LeaseRenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var n int64
		err := s.db.InTx(ctx, l.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			n, err = tx.Q.RunRenewLease(ctx, dbsqlc.RunRenewLeaseParams{TenantID: l.Run.TenantID, ID: l.Run.ID, Attempt: l.Attempt, LeaseSeconds: LeaseDuration.Seconds()})
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "renew run lease", "run_id", l.Run.ID.String(), "error", err)
			}
			continue
		}
		if n == 0 {
			lost()
			return
		}
	}
}

// Suspend parks the leased run in status (AWAITING_APPROVAL or PAUSED) inside tx, with its
// events: the job ends and no worker holds the run until Resume.
func (s *Service) Suspend(ctx context.Context, tx *db.Tx, l Lease, status Status, news ...events.New) (dbsqlc.Run, error) {
	r, err := tx.Q.RunSuspend(ctx, dbsqlc.RunSuspendParams{TenantID: l.Run.TenantID, ID: l.Run.ID, Attempt: l.Attempt, Status: status})
	if db.IsNoRows(err) {
		return r, ErrFenced
	}
	if err != nil {
		return r, fmt.Errorf("suspend run %s: %w", l.Run.ID, err)
	}
	_, err = s.pub.Append(ctx, tx, ScopeOf(r), news...)
	return r, err
}

// Resume makes a run that is in status from workable again inside tx and enqueues its
// continuation job (the executor picks up where the run stopped).
func (s *Service) Resume(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, from Status, news ...events.New) (dbsqlc.Run, error) {
	r, err := tx.Q.RunRequeue(ctx, dbsqlc.RunRequeueParams{TenantID: tenantID, ID: runID, FromStatuses: []string{string(from)}})
	if db.IsNoRows(err) {
		return r, apperr.New(apperr.Conflict, "the run cannot be resumed from its current state")
	}
	if err != nil {
		return r, fmt.Errorf("requeue run %s: %w", runID, err)
	}
	if _, err := s.pub.Append(ctx, tx, ScopeOf(r), news...); err != nil {
		return r, err
	}
	return r, s.Enqueue(ctx, tx, r)
}

// orphanGrace is how long a picked-up job may go without acquiring its queued run before the
// reaper assumes its worker died (acquiring takes milliseconds; fencing makes a wrong guess
// harmless).
const orphanGrace = 10 * time.Second

// ReapExpired takes over running runs whose lease expired (their worker died): each is fenced
// (attempt += 1) and re-enqueued, so it resumes after its last persisted step within seconds
// instead of waiting for River's stuck-job rescue. It returns how many runs it took over.
func (s *Service) ReapExpired(ctx context.Context) (int, error) {
	var expired []runRef
	err := s.db.InSystemTx(ctx, "reaper: find runs of every tenant whose worker died", func(ctx context.Context, tx *db.Tx) error {
		leases, err := tx.Q.RunListExpiredLeases(ctx, 100)
		if err != nil {
			return err
		}
		for _, r := range leases {
			expired = append(expired, runRef{r.TenantID, r.ID, r.JobID})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	orphans, err := s.orphans(ctx)
	if err != nil {
		return 0, err
	}
	expired = append(expired, orphans...)
	n := 0
	for _, e := range expired {
		err := s.db.InTx(ctx, e.TenantID, func(ctx context.Context, tx *db.Tx) error {
			r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: e.TenantID, ID: e.ID})
			if err != nil {
				return err
			}
			if !sameJob(r.JobID, e.job) {
				return nil // handed on meanwhile (another reap resumed it, with a job of its own)
			}
			orphan := r.Status == StatusQueued
			if !orphan && (r.Status != StatusRunning || r.LeaseExpiresAt == nil || r.LeaseExpiresAt.After(time.Now())) {
				return nil // renewed or finished meanwhile
			}
			if r.JobID != nil {
				// The dead worker's job would be rescued by River much later; it must not run.
				if _, err := s.jobs.JobCancelTx(ctx, tx.Tx, *r.JobID); err != nil && !errors.Is(err, errNotFound) {
					return fmt.Errorf("cancel orphaned job: %w", err)
				}
			}
			reason := "worker lost: lease expired"
			if orphan {
				reason = "worker lost before it started the run"
			}
			_, err = s.Resume(ctx, tx, e.TenantID, e.ID, r.Status, events.New{Type: events.ExecutionResumed, Data: map[string]any{
				"reason": reason, "previousAttempt": r.Attempt, "previousOwner": r.LeaseOwner,
			}})
			if err == nil {
				n++
			}
			return err
		})
		if err != nil {
			s.log.WarnContext(ctx, "reap run", "run_id", e.ID.String(), "error", err)
		}
	}
	s.metrics.ReaperTookOver(n)
	return n, nil
}

// runRef names a run the reaper may take over; job is the run's job when it was listed: a run
// whose job has changed since was handed on (by another reap, say) and is left alone.
type runRef struct {
	TenantID, ID uuid.UUID
	job          *int64
}

// orphans lists the runs whose job a worker took (River has it running) longer than orphanGrace
// ago, the oldest first: a run that is still QUEUED then was never acquired, and its worker died
// between the two. Runs whose job moved on are left out when each is locked (ReapExpired).
func (s *Service) orphans(ctx context.Context) ([]runRef, error) {
	res, err := s.jobs.JobList(ctx, river.NewJobListParams().Kinds(Args{}.Kind()).States(rivertype.JobStateRunning).
		OrderBy(river.JobListOrderByTime, river.SortOrderAsc).First(100))
	if err != nil {
		return nil, fmt.Errorf("list running run jobs: %w", err)
	}
	var out []runRef
	for _, j := range res.Jobs {
		if j.AttemptedAt == nil || time.Since(*j.AttemptedAt) < orphanGrace {
			break
		}
		var args Args
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			continue
		}
		out = append(out, runRef{args.TenantID, args.RunID, &j.ID})
	}
	return out, nil
}

// RequestStop asks a run to stop gracefully: it finishes its current step, summarises what it
// did and ends COMPLETED (terminationReason user_stop). A queued or parked run stops at once.
// Stopping a run cancels its descendants (sub-agents) at once. A run worked through other runs
// (a team run) passes the stop on to them: each finishes its step and ends so, and the run's
// kind ends the run when they have (its hook reads the run's stop request).
func (s *Service) RequestStop(ctx context.Context, runID uuid.UUID) (dbsqlc.Run, error) {
	var workers, desc []dbsqlc.Run
	return s.controlAfter(ctx, runID, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		var err error
		workers, desc, err = s.lockTree(ctx, tx, tenantID, runID)
		return err
	}, func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
		if r.Status == StatusRunning {
			if _, err := tx.Q.RunSetStopRequested(ctx, dbsqlc.RunSetStopRequestedParams{TenantID: r.TenantID, ID: r.ID}); err != nil {
				return err
			}
		} else if _, err := s.finish(ctx, tx, r, r.Attempt, Outcome{Status: StatusCompleted, TerminationReason: "user_stop"}, true, false); err != nil {
			return err
		}
		for _, w := range workers {
			if err := s.stopOne(ctx, tx, w); err != nil {
				return err
			}
		}
		return s.cancelDescendants(ctx, tx, desc)
	})
}

// stopOne asks w (locked), a worker of a run being stopped, to stop: a running one after its
// step, any other that has not ended at once.
func (s *Service) stopOne(ctx context.Context, tx *db.Tx, w dbsqlc.Run) error {
	w, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: w.TenantID, ID: w.ID})
	if err != nil {
		return fmt.Errorf("reload run %s: %w", w.ID, err)
	}
	switch {
	case IsTerminal(w.Status):
		return nil
	case w.Status == StatusRunning:
		_, err = tx.Q.RunSetStopRequested(ctx, dbsqlc.RunSetStopRequestedParams{TenantID: w.TenantID, ID: w.ID})
		return err
	}
	if w.JobID != nil {
		if _, err := s.jobs.JobCancelTx(ctx, tx.Tx, *w.JobID); err != nil && !errors.Is(err, errNotFound) {
			return fmt.Errorf("cancel job of run %s: %w", w.ID, err)
		}
	}
	_, err = s.finish(ctx, tx, w, w.Attempt, Outcome{Status: StatusCompleted, TerminationReason: "user_stop"}, true, false)
	return err
}

// RequestPause asks a running run to pause after its current step (execution.paused); a queued
// run is parked at once. A run worked through other runs (a team run) stays RUNNING with its
// pause requested, and passes the pause on to them.
func (s *Service) RequestPause(ctx context.Context, runID uuid.UUID) (dbsqlc.Run, error) {
	return s.controlWithWorkers(ctx, runID, s.pauseOne, func(w dbsqlc.Run) bool {
		return w.Status == StatusRunning || w.Status == StatusQueued
	})
}

// controlWithWorkers is controlAfter applying one to the run, then to each of its workers
// (locked first) that want accepts.
func (s *Service) controlWithWorkers(ctx context.Context, runID uuid.UUID, one func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error, want func(dbsqlc.Run) bool) (dbsqlc.Run, error) {
	var workers []dbsqlc.Run
	return s.controlAfter(ctx, runID, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		var err error
		workers, err = s.lockWorkers(ctx, tx, tenantID, runID)
		return err
	}, func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
		if err := one(ctx, tx, r); err != nil {
			return err
		}
		for _, w := range workers {
			if want(w) {
				if err := one(ctx, tx, w); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// pauseOne pauses r (locked): a running run after its current step, a queued one at once.
func (s *Service) pauseOne(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	switch r.Status {
	case StatusRunning:
		_, err := tx.Q.RunSetPauseRequested(ctx, dbsqlc.RunSetPauseRequestedParams{TenantID: r.TenantID, ID: r.ID, PauseRequested: true})
		return err
	case StatusQueued:
		return s.Park(ctx, tx, r, "paused by the user")
	case StatusPaused:
		return nil
	}
	return apperr.New(apperr.Conflict, "a %s run cannot be paused", r.Status)
}

// Park pauses queued run r (locked) inside tx: its job, if any, is cancelled, and it is PAUSED
// until ResumePaused (execution.paused, with reason).
func (s *Service) Park(ctx context.Context, tx *db.Tx, r dbsqlc.Run, reason string) error {
	if r.JobID != nil {
		if _, err := s.jobs.JobCancelTx(ctx, tx.Tx, *r.JobID); err != nil && !errors.Is(err, errNotFound) {
			return err
		}
	}
	p, err := tx.Q.RunSuspendQueued(ctx, dbsqlc.RunSuspendQueuedParams{TenantID: r.TenantID, ID: r.ID})
	if err != nil {
		return err
	}
	_, err = s.pub.Append(ctx, tx, ScopeOf(p), events.New{Type: events.ExecutionPaused, Data: map[string]any{"reason": reason}})
	return err
}

// ResumePaused resumes a paused run (execution.resumed), and the runs that work it (a team
// run's phase).
func (s *Service) ResumePaused(ctx context.Context, runID uuid.UUID) (dbsqlc.Run, error) {
	return s.controlWithWorkers(ctx, runID, s.resumeOne, func(w dbsqlc.Run) bool {
		return w.Status == StatusPaused || (w.Status == StatusRunning && w.PauseRequested)
	})
}

// resumeOne resumes r (locked): a running run whose pause was requested keeps running, a paused
// one is requeued.
func (s *Service) resumeOne(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	if r.Status == StatusRunning && r.PauseRequested {
		_, err := tx.Q.RunSetPauseRequested(ctx, dbsqlc.RunSetPauseRequestedParams{TenantID: r.TenantID, ID: r.ID, PauseRequested: false})
		return err
	}
	if r.Status != StatusPaused {
		return apperr.New(apperr.Conflict, "only a paused run can be resumed (this one is %s)", r.Status)
	}
	if _, err := tx.Q.RunSetPauseRequested(ctx, dbsqlc.RunSetPauseRequestedParams{TenantID: r.TenantID, ID: r.ID, PauseRequested: false}); err != nil {
		return err
	}
	_, err := s.Resume(ctx, tx, r.TenantID, r.ID, StatusPaused, events.New{Type: events.ExecutionResumed, Data: map[string]any{"reason": "resumed by the user"}})
	return err
}

// controlAfter runs fn on a locked run the caller may control (MayControl; MEMBER or higher)
// and returns the run afterwards; first, when set, runs in the transaction before the run is
// locked (to lock its workers and descendants first). A run that has ended is CONFLICT.
func (s *Service) controlAfter(ctx context.Context, runID uuid.UUID, first func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error, fn func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error) (dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Run{}, err
	}
	var out dbsqlc.Run
	err = s.db.InTxRetry(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if first != nil {
			if err := first(ctx, tx, a.TenantID); err != nil {
				return err
			}
		}
		r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: a.TenantID, ID: runID})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("run")
		}
		if err != nil {
			return err
		}
		if err := MayControl(ctx, tx, a, r, "control"); err != nil {
			return err
		}
		if IsTerminal(r.Status) {
			return endedError(r)
		}
		if err := fn(ctx, tx, r); err != nil {
			return err
		}
		out, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: a.TenantID, ID: runID})
		return err
	})
	return out, err
}

// endedError is the answer to controlling (pausing, resuming, stopping, cancelling) run r,
// which has ended: CONFLICT naming its status.
func endedError(r dbsqlc.Run) error {
	return apperr.New(apperr.Conflict, "run already %s", r.Status).With("runStatus", r.Status)
}

// sameJob reports whether two job ids (nil: none) are the same.
func sameJob(a, b *int64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
