package subagent

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
)

// DispatchArgs asks for a dispatcher pass: enqueued with every spawn and every sub-agent's end,
// and periodically (DispatchEvery) in case one was lost. Requests collapse (River's unique
// jobs): while a pass of a key waits for a worker, another request of that key is that pass.
// Again is the second key, asked for when the first one's pass is already running (it may have
// read its candidates before the requester's transaction commits); see requestDispatch.
type DispatchArgs struct {
	Again bool `json:"again,omitempty" river:"unique"`
}

// Kind names the job.
func (DispatchArgs) Kind() string { return "subagent_dispatch" }

// dispatchStates are the job states in which a pass request collapses into an existing one
// (River requires available, pending, running and scheduled).
var dispatchStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// InsertOpts puts passes on the default queue (where sub-agent runs are worked too), unique by
// key among those not yet ended.
func (DispatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: dispatchStates}}
}

// DispatchEvery is the period of the dispatcher's safety-net pass.
const DispatchEvery = 5 * time.Second

// DispatchWorker works DispatchArgs.
type DispatchWorker struct {
	river.WorkerDefaults[DispatchArgs]
	s *Service
}

// Work runs a pass.
func (w *DispatchWorker) Work(ctx context.Context, _ *river.Job[DispatchArgs]) error {
	_, err := w.s.Dispatch(ctx)
	return err
}

// Register adds the dispatcher's and the wait timeout's workers, and returns the periodic pass.
func (s *Service) Register(workers *river.Workers) []*river.PeriodicJob {
	river.AddWorker(workers, &DispatchWorker{s: s})
	river.AddWorker(workers, &WaitTimeoutWorker{s: s})
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(DispatchEvery), func() (river.JobArgs, *river.InsertOpts) {
			return DispatchArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}

// Dispatch starts the pending sub-agents that may start now and returns how many it started.
// One pass runs at a time in all processes (a transaction-scoped advisory lock), so the slot
// counts it reads cannot change under it except downwards (a sub-agent ending frees its slot);
// the candidates come in priority then age order per parent and tenant, the tenants
// interleaved round robin (SubagentDispatchCandidates), at most the platform's free slots. Each
// is started by giving its run its job (run.Service.Enqueue) in the pass's transaction. A run
// locked by someone else (being cancelled) is skipped; the next pass sees it. Sub-agents left
// under a parent that ended are then cancelled, with their own.
func (s *Service) Dispatch(ctx context.Context) (int, error) {
	n := 0
	err := s.db.InSystemTx(ctx, "sub-agent dispatcher: slots are counted across every tenant", func(ctx context.Context, tx *db.Tx) error {
		n = 0
		if err := tx.Q.SubagentDispatchLock(ctx); err != nil {
			return fmt.Errorf("dispatcher lock: %w", err)
		}
		active, err := tx.Q.SubagentPlatformActive(ctx)
		if err != nil {
			return err
		}
		free := s.limits.Platform - int(active)
		if free <= 0 {
			return nil
		}
		cands, err := tx.Q.SubagentDispatchCandidates(ctx, dbsqlc.SubagentDispatchCandidatesParams{
			ParentMax: int64(s.limits.Parent), TenantMax: int64(s.limits.Tenant), Lim: int32(free),
		})
		if err != nil {
			return fmt.Errorf("dispatch candidates: %w", err)
		}
		for _, c := range cands {
			r, err := tx.Q.RunGetForUpdateSkipLocked(ctx, dbsqlc.RunGetForUpdateSkipLockedParams{TenantID: c.TenantID, ID: c.ID})
			if db.IsNoRows(err) {
				continue
			}
			if err != nil {
				return err
			}
			if r.Status != run.StatusQueued || r.JobID != nil {
				continue
			}
			if _, err := tx.Q.SubagentDispatchMark(ctx, dbsqlc.SubagentDispatchMarkParams{TenantID: c.TenantID, ID: c.ID}); db.IsNoRows(err) {
				continue
			} else if err != nil {
				return err
			}
			if err := s.runs.Enqueue(ctx, tx, r); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, s.cancelOrphans(ctx)
}

// cancelOrphans cancels the sub-agents (and theirs) still going under a parent that has ended.
func (s *Service) cancelOrphans(ctx context.Context) error {
	var orphans []dbsqlc.SubagentOrphansRow
	err := s.db.InSystemTx(ctx, "sub-agent dispatcher: find sub-agents of every tenant whose parent ended", func(ctx context.Context, tx *db.Tx) error {
		var err error
		orphans, err = tx.Q.SubagentOrphans(ctx)
		return err
	})
	if err != nil {
		return err
	}
	for _, o := range orphans {
		if err := s.runs.CancelTree(ctx, o.TenantID, o.ID, "its parent run ended"); err != nil {
			s.log.WarnContext(ctx, "cancel orphaned sub-agent", "subagent_id", o.ID.String(), "error", err)
		}
	}
	return nil
}
