package approval

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/run"
)

// ExpireEvery is how often the expiry sweep runs, and so how late past its deadline an
// approval may be marked EXPIRED (an expired approval never permits a call either way: Resolve
// refuses it and Permits checks the deadline).
const ExpireEvery = time.Minute

// ExpireArgs is the periodic job that expires approvals past their deadline in every tenant.
type ExpireArgs struct{}

// Kind names the job.
func (ExpireArgs) Kind() string { return "approval_expire" }

// InsertOpts puts the job on the maintenance queue; one waiting sweep makes another pointless.
func (ExpireArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: run.QueueMaintenance, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: ExpireEvery}}
}

// ExpireWorker works ExpireArgs.
type ExpireWorker struct {
	river.WorkerDefaults[ExpireArgs]
	s *Service
}

// NewExpireWorker returns the worker of the expiry sweep.
func NewExpireWorker(s *Service) *ExpireWorker { return &ExpireWorker{s: s} }

// Work expires every due approval and resumes the runs that waited on them.
func (w *ExpireWorker) Work(ctx context.Context, _ *river.Job[ExpireArgs]) error {
	_, err := w.s.ExpireDue(ctx)
	return err
}

// ExpirePeriodicJob schedules the expiry sweep every ExpireEvery (and once at start).
func ExpirePeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(ExpireEvery), func() (river.JobArgs, *river.InsertOpts) {
		return ExpireArgs{}, nil
	}, &river.PeriodicJobOpts{RunOnStart: true})
}
