package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// LeaderBeatEvery is how often River's leader enqueues a LeaderBeatArgs job. Periodic jobs are
// enqueued by the elected leader only, so a recent beat shows that the workers have a leader
// (which also runs River's maintenance: rescuing stuck jobs, cleaning finished ones).
const LeaderBeatEvery = 10 * time.Second

// LeaderBeatStale is the age beyond which the newest beat means there is no leader: three
// missed beats, longer than River takes to elect a new leader after one died.
const LeaderBeatStale = 3*LeaderBeatEvery + 5*time.Second

// LeaderBeatArgs is the leader's heartbeat job; working it does nothing.
type LeaderBeatArgs struct{}

// Kind names the job.
func (LeaderBeatArgs) Kind() string { return "leader_beat" }

// InsertOpts puts the job on the maintenance queue, one per period.
func (LeaderBeatArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: LeaderBeatEvery}}
}

// LeaderBeatWorker works LeaderBeatArgs.
type LeaderBeatWorker struct {
	river.WorkerDefaults[LeaderBeatArgs]
}

// Work does nothing: the job's insert is the beat.
func (LeaderBeatWorker) Work(context.Context, *river.Job[LeaderBeatArgs]) error { return nil }

func leaderBeatJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(LeaderBeatEvery), func() (river.JobArgs, *river.InsertOpts) {
		return LeaderBeatArgs{}, nil
	}, &river.PeriodicJobOpts{RunOnStart: true})
}

// CheckLeader returns nil when River's leader enqueued a beat within LeaderBeatStale, and an
// error saying how long ago the last one was otherwise. It reads through River's client.
func CheckLeader(ctx context.Context, client *river.Client[pgx.Tx]) error {
	res, err := client.JobList(ctx, river.NewJobListParams().Kinds(LeaderBeatArgs{}.Kind()).
		OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(1))
	if err != nil {
		return fmt.Errorf("list leader beats: %w", err)
	}
	if len(res.Jobs) == 0 {
		return fmt.Errorf("no River leader: no worker has enqueued periodic jobs yet")
	}
	if age := time.Since(res.Jobs[0].CreatedAt); age > LeaderBeatStale {
		return fmt.Errorf("no River leader: periodic jobs were last enqueued %s ago", age.Round(time.Second))
	}
	return nil
}
