package routine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
)

// CronScanEvery is how often the scheduler looks for CRON routines whose tick has come.
const CronScanEvery = 10 * time.Second

// CronScanArgs looks for due CRON routines of every tenant.
type CronScanArgs struct{}

// Kind names the job.
func (CronScanArgs) Kind() string { return "routine_cron_scan" }

// InsertOpts: the maintenance queue, one scan per period.
func (CronScanArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: run.QueueMaintenance, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: CronScanEvery}}
}

// CronFireArgs starts one run of a CRON routine for one tick. It is unique by its args: any
// number of schedulers asking for the same routine and tick make one job, so one run.
type CronFireArgs struct {
	TenantID  uuid.UUID `json:"tenant_id"`
	RoutineID uuid.UUID `json:"routine_id"`
	Tick      time.Time `json:"tick"`
}

// Kind names the job.
func (CronFireArgs) Kind() string { return "routine_cron_fire" }

// InsertOpts makes the job unique per routine and tick.
func (CronFireArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ScanCron inserts a fire job for every active CRON routine whose next tick has come (by the
// service's clock) and moves its next tick on past now: ticks missed while the routine was
// paused, or while no scheduler ran, are skipped. It returns how many ticks it asked to fire
// (jobs River made unique count too).
func (s *Service) ScanCron(ctx context.Context) (int, error) {
	now := s.clock()
	var due []dbsqlc.RoutineListDueRow
	err := s.db.InSystemTx(ctx, "routine scheduler: find the CRON routines of every tenant whose tick has come", func(ctx context.Context, tx *db.Tx) error {
		var err error
		due, err = tx.Q.RoutineListDue(ctx, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range due {
		if _, err := s.jobs.Insert(ctx, CronFireArgs{TenantID: d.TenantID, RoutineID: d.ID, Tick: d.NextFireAt.UTC()}, nil); err != nil {
			return n, fmt.Errorf("enqueue cron fire: %w", err)
		}
		n++
		err := s.db.InTx(ctx, d.TenantID, func(ctx context.Context, tx *db.Tx) error {
			rt, err := tx.Q.RoutineGet(ctx, dbsqlc.RoutineGetParams{TenantID: d.TenantID, ID: d.ID})
			if err != nil {
				return err
			}
			next, err := NextFire(deref(rt.Cron), deref(rt.Timezone), now)
			if err != nil {
				return err
			}
			return tx.Q.RoutineSetNextFire(ctx, dbsqlc.RoutineSetNextFireParams{TenantID: d.TenantID, ID: d.ID, NextFireAt: next, Fired: d.NextFireAt})
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// CronScanWorker works CronScanArgs.
type CronScanWorker struct {
	river.WorkerDefaults[CronScanArgs]
	s *Service
}

// Work scans once.
func (w *CronScanWorker) Work(ctx context.Context, _ *river.Job[CronScanArgs]) error {
	_, err := w.s.ScanCron(ctx)
	return err
}

// CronFireWorker works CronFireArgs.
type CronFireWorker struct {
	river.WorkerDefaults[CronFireArgs]
	s *Service
}

// Work starts the routine's run for the tick, unless the routine is gone, paused or no longer
// a CRON routine, or the tick has a run already.
func (w *CronFireWorker) Work(ctx context.Context, job *river.Job[CronFireArgs]) error {
	a := job.Args
	err := w.s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rt, err := tx.Q.RoutineGet(ctx, dbsqlc.RoutineGetParams{TenantID: a.TenantID, ID: a.RoutineID})
		if db.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !rt.Active || rt.Trigger != TriggerCron {
			return nil
		}
		tick := a.Tick
		_, err = w.s.start(ctx, tx, rt.CreatedBy, rt, nil, "", &tick)
		return err
	})
	if errors.Is(err, errTickFired) {
		return nil
	}
	return err
}

// Register adds the routine workers and the scheduler's periodic job.
func (s *Service) Register(w *river.Workers) []*river.PeriodicJob {
	river.AddWorker(w, NewStepWorker(s))
	river.AddWorker(w, &CronScanWorker{s: s})
	river.AddWorker(w, &CronFireWorker{s: s})
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(CronScanEvery), func() (river.JobArgs, *river.InsertOpts) {
			return CronScanArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}
