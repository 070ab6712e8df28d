package workspace

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/run"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// DefaultRetention is how long workspace history is kept when AGENTRY_WORKSPACE_RETENTION is
// not set: 30 days.
const DefaultRetention = 30 * 24 * time.Hour

// PruneEvery is how often the retention job runs.
const PruneEvery = time.Hour

// PruneStats counts what one Prune deleted.
type PruneStats struct {
	Tenants   int   `json:"tenants"`
	Snapshots int64 `json:"snapshots"`
	Versions  int64 `json:"versions"`
	Journal   int64 `json:"journal"`
	Blobs     int64 `json:"blobs"`
}

// Prune deletes the workspace history of every tenant older than cutoff: snapshots (with their
// manifests), file versions and journal entries, then the blobs nothing refers to any more and
// nobody wrote since cutoff. It never deletes:
//   - the latest version of a path (a file's current version, or the deletion that ended it);
//   - the snapshot, versions or journal of a run that has not ended, or whose rollback question
//     waits for an answer (rolling back needs them);
//   - a blob a current file, a remaining version, snapshot or journal entry refers to.
//
// Tenants with old history are found in one system transaction; each is then pruned in its own
// tenant-scoped transaction. A tenant that fails is skipped (the first error is returned once
// the others are done).
func (s *Service) Prune(ctx context.Context, cutoff time.Time) (PruneStats, error) {
	var stats PruneStats
	var tenants []uuid.UUID
	err := s.db.InSystemTx(ctx, "workspace retention: find tenants with workspace history older than the cutoff", func(ctx context.Context, tx *db.Tx) error {
		var err error
		tenants, err = tx.Q.WorkspacePruneTenants(ctx, cutoff)
		return err
	})
	if err != nil {
		return stats, fmt.Errorf("list tenants to prune: %w", err)
	}
	var first error
	for _, tenantID := range tenants {
		var one PruneStats
		err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			one, err = pruneTenant(ctx, tx, tenantID, cutoff)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return stats, ctx.Err()
			}
			if first == nil {
				first = fmt.Errorf("prune workspace history of tenant %s: %w", tenantID, err)
			}
			continue
		}
		stats.Tenants++
		stats.Snapshots += one.Snapshots
		stats.Versions += one.Versions
		stats.Journal += one.Journal
		stats.Blobs += one.Blobs
	}
	return stats, first
}

func pruneTenant(ctx context.Context, tx *db.Tx, tenantID uuid.UUID, cutoff time.Time) (PruneStats, error) {
	var st PruneStats
	keep, err := tx.Q.WorkspacePruneKeepRuns(ctx, tenantID)
	if err != nil {
		return st, fmt.Errorf("runs awaiting a decision: %w", err)
	}
	if keep == nil {
		keep = []uuid.UUID{} // NULL would match nothing, and keep nothing out
	}
	if st.Snapshots, err = tx.Q.WorkspacePruneSnapshots(ctx, dbsqlc.WorkspacePruneSnapshotsParams{TenantID: tenantID, Cutoff: cutoff, KeepRuns: keep}); err != nil {
		return st, fmt.Errorf("prune snapshots: %w", err)
	}
	if st.Journal, err = tx.Q.WorkspacePruneJournal(ctx, dbsqlc.WorkspacePruneJournalParams{TenantID: tenantID, Cutoff: cutoff, KeepRuns: keep}); err != nil {
		return st, fmt.Errorf("prune journal: %w", err)
	}
	if st.Versions, err = tx.Q.WorkspacePruneVersions(ctx, dbsqlc.WorkspacePruneVersionsParams{TenantID: tenantID, Cutoff: cutoff, KeepRuns: keep}); err != nil {
		return st, fmt.Errorf("prune versions: %w", err)
	}
	if st.Blobs, err = tx.Q.WorkspacePruneBlobs(ctx, dbsqlc.WorkspacePruneBlobsParams{TenantID: tenantID, Cutoff: cutoff}); err != nil {
		return st, fmt.Errorf("prune blobs: %w", err)
	}
	return st, nil
}

// PruneArgs is the periodic job deleting workspace history older than the retention.
type PruneArgs struct{}

// Kind names the job.
func (PruneArgs) Kind() string { return "workspace_prune" }

// InsertOpts puts the job on the maintenance queue, one at a time.
func (PruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: run.QueueMaintenance, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByPeriod: PruneEvery}}
}

// PruneWorker works PruneArgs: it prunes history older than Retention (DefaultRetention when
// zero) and records what it deleted as the job's output.
type PruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	Service   *Service
	Retention time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Work prunes once.
func (w *PruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	retention := w.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	stats, err := w.Service.Prune(ctx, now().Add(-retention))
	if oerr := river.RecordOutput(ctx, stats); oerr != nil && err == nil {
		err = oerr
	}
	return err
}

// Timeout lets a first prune of a long history finish.
func (w *PruneWorker) Timeout(*river.Job[PruneArgs]) time.Duration { return 10 * time.Minute }

// Register adds the retention worker to workers and returns its periodic job (hourly, and at
// start): internal/jobs calls it through Options.Register.
func (s *Service) Register(workers *river.Workers, retention time.Duration) []*river.PeriodicJob {
	river.AddWorker(workers, &PruneWorker{Service: s, Retention: retention})
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(PruneEvery), func() (river.JobArgs, *river.InsertOpts) {
			return PruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}
