package usage

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/run"
)

// Periods of the usage jobs.
const (
	// SweepEvery is how often the sweeper releases the reservations of dead runs.
	SweepEvery = 15 * time.Second
	// RollupEvery is how often closed days are rolled up (work happens once a day).
	RollupEvery = 10 * time.Minute
)

// SweepArgs is the periodic job releasing the reservations of dead runs in every tenant.
type SweepArgs struct{}

// Kind names the job.
func (SweepArgs) Kind() string { return "usage_sweep" }

// InsertOpts puts the job on the maintenance queue; one waiting sweep makes another pointless.
func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: run.QueueMaintenance, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: SweepEvery}}
}

// SweepWorker works SweepArgs.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *Service
}

// Work releases every dead reservation.
func (w *SweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.s.ReleaseDead(ctx)
	return err
}

// RollupArgs is the periodic job rolling closed days of usage records into usage_daily.
type RollupArgs struct{}

// Kind names the job.
func (RollupArgs) Kind() string { return "usage_rollup" }

// InsertOpts puts the job on the maintenance queue, one at a time.
func (RollupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: run.QueueMaintenance, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByPeriod: RollupEvery}}
}

// RollupWorker works RollupArgs.
type RollupWorker struct {
	river.WorkerDefaults[RollupArgs]
	s *Service
}

// Work rolls up the closed days not rolled up yet.
func (w *RollupWorker) Work(ctx context.Context, _ *river.Job[RollupArgs]) error {
	_, err := w.s.Rollup(ctx)
	return err
}

// Timeout lets a first rollup of a long history finish.
func (w *RollupWorker) Timeout(*river.Job[RollupArgs]) time.Duration { return 10 * time.Minute }

// Register adds the usage workers to workers and returns their periodic jobs (the sweeper and
// the rollup, both run at start too): internal/jobs calls it through Options.Register.
func (s *Service) Register(workers *river.Workers) []*river.PeriodicJob {
	river.AddWorker(workers, &SweepWorker{s: s})
	river.AddWorker(workers, &RollupWorker{s: s})
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(SweepEvery), func() (river.JobArgs, *river.InsertOpts) {
			return SweepArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(RollupEvery), func() (river.JobArgs, *river.InsertOpts) {
			return RollupArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}
