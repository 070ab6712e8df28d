// Package jobs owns agentry's River client: queues, worker registration, periodic jobs and the
// retry policy. Domains enqueue through the client's InsertTx inside their own transactions.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/run"
)

// Queue names.
const (
	QueueDefault     = river.QueueDefault
	QueueMaintenance = run.QueueMaintenance
)

// Options configure the River client.
type Options struct {
	// Work makes the client work jobs (worker and dev processes); otherwise it only inserts.
	Work bool
	// Concurrency is the number of jobs worked at once on the default and chat queues.
	Concurrency int
	// Executor works runs (required with Work).
	Executor *agent.Executor
	// RetryBaseDelay is the first retry delay of a run attempt (doubling after).
	RetryBaseDelay time.Duration
	// Owner names this worker process in run leases.
	Owner string
	// Runs is the run service (the reaper of runs whose worker died).
	Runs *run.Service
	// Extra workers and periodic jobs of other domains.
	Register func(*river.Workers) []*river.PeriodicJob
	// Queues are other domains' queues (webhook deliveries).
	Queues map[string]river.QueueConfig
	Log    *slog.Logger
	// Queue is the pool River's own statements run on (db.OpenQueue); d's when nil.
	Queue *db.DB
	// Metrics counts retried and discarded jobs (nil: not counted).
	Metrics *metrics.Metrics
	// Hooks and Middleware are added to River's (tracing).
	Hooks      []rivertype.Hook
	Middleware []rivertype.Middleware
}

// NewClient returns the River client over o.Queue's pool (d's when nil); its workers use d.
func NewClient(d *db.DB, o Options) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{
		Logger: o.Log,
		// Also the pace of this client's insert notifications per queue (River sends at most
		// one per queue per client-level FetchCooldown, 100 ms by default): a chat turn inserted
		// between two notifications waits for the next one or the queue's poll, which cost
		// chat turns tens of milliseconds of pickup (agentry bench, Q-LAT).
		FetchCooldown: FetchCooldown,
		// River's own rescue of stuck jobs must wait longer than the longest attempt may run
		// (timeoutSeconds is at most an hour; a complex task run 60 minutes): runs whose worker
		// died are taken over much sooner by the run reaper, through their lease.
		RescueStuckJobsAfter: 2 * time.Hour,
		Hooks:                append([]rivertype.Hook{&metricsHook{m: o.Metrics}}, o.Hooks...),
		Middleware:           o.Middleware,
	}
	if o.Work {
		workers := river.NewWorkers()
		river.AddWorker(workers, &RefreshTokenPurgeWorker{db: d})
		runWorker := &RunWorker{exec: o.Executor, owner: o.Owner, base: max(o.RetryBaseDelay, time.Millisecond)}
		river.AddWorker(workers, runWorker)
		river.AddWorker(workers, &RunReapWorker{runs: o.Runs})
		river.AddWorker(workers, LeaderBeatWorker{})
		if o.Concurrency < 1 {
			o.Concurrency = 50
		}
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{
			QueueDefault: {MaxWorkers: o.Concurrency},
			// Chat turns: a user is waiting, so pick up within milliseconds of the insert.
			run.QueueChat:    ChatQueue(o.Concurrency),
			QueueMaintenance: {MaxWorkers: 2},
		}
		for name, q := range o.Queues {
			cfg.Queues[name] = q
		}
		cfg.PeriodicJobs = []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
				return RefreshTokenPurgeArgs{}, nil
			}, &river.PeriodicJobOpts{RunOnStart: true}),
			// Also enqueued by every working process (Start); this one covers a client started
			// without Start.
			river.NewPeriodicJob(river.PeriodicInterval(ReapEvery), func() (river.JobArgs, *river.InsertOpts) {
				return RunReapArgs{}, nil
			}, &river.PeriodicJobOpts{RunOnStart: true}),
			leaderBeatJob(),
		}
		if o.Register != nil {
			cfg.PeriodicJobs = append(cfg.PeriodicJobs, o.Register(workers)...)
		}
	}
	pool := d.Pool
	if o.Queue != nil {
		pool = o.Queue.Pool
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}

// FetchCooldown is the least time between two fetches of the chat queue, and between two insert
// notifications of any queue from one client.
const FetchCooldown = run.FetchCooldown

// ChatQueue is the configuration of the chat queue for a worker running concurrency jobs at
// once. A user is waiting on every chat turn, so jobs are picked up within milliseconds of their
// insert. (agentry bench's bare-River baseline uses it too, so the two stay alike.)
func ChatQueue(concurrency int) river.QueueConfig {
	return river.QueueConfig{MaxWorkers: concurrency, FetchCooldown: FetchCooldown, FetchPollInterval: 200 * time.Millisecond}
}

// RefreshTokenPurgeArgs deletes long-expired refresh tokens of every tenant.
type RefreshTokenPurgeArgs struct{}

// Kind names the job.
func (RefreshTokenPurgeArgs) Kind() string { return "refresh_token_purge" }

// InsertOpts puts the job on the maintenance queue, one at a time.
func (RefreshTokenPurgeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// RefreshTokenPurgeWorker works RefreshTokenPurgeArgs.
type RefreshTokenPurgeWorker struct {
	river.WorkerDefaults[RefreshTokenPurgeArgs]
	db *db.DB
}

// Work deletes the expired tokens in one system transaction.
func (w *RefreshTokenPurgeWorker) Work(ctx context.Context, _ *river.Job[RefreshTokenPurgeArgs]) error {
	return w.db.InSystemTx(ctx, "maintenance: purge expired refresh tokens of every tenant", func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.RefreshTokenPurgeExpired(ctx)
		return err
	})
}

// ReapEvery is how often the reaper looks for runs whose worker died (lease expired).
const ReapEvery = 5 * time.Second

// Start starts client, which works jobs (Options.Work), and enqueues a run reap every ReapEvery
// from this process until the client stops. Every working process enqueues them, and the reap's
// unique period makes one job of each period's inserts. River's leader enqueues them too (a
// periodic job of NewClient's), which alone would not do: a leader killed without resigning is
// replaced only when its leadership expires (River's 15 s, and up to 6 s to the next election),
// and the runs its death interrupted would wait that much longer to resume.
func Start(ctx context.Context, client *river.Client[pgx.Tx], log *slog.Logger) error {
	if err := client.Start(ctx); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(ReapEvery)
		defer t.Stop()
		for {
			select {
			case <-client.Stopped():
				return
			default:
			}
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReapEvery)
			_, err := client.Insert(ictx, RunReapArgs{}, nil)
			cancel()
			if err != nil && log != nil {
				log.WarnContext(ctx, "enqueue run reap", "error", err)
			}
			select {
			case <-client.Stopped():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// RunReapArgs takes over runs whose lease expired.
type RunReapArgs struct{}

// Kind names the job.
func (RunReapArgs) Kind() string { return "run_reap" }

// InsertOpts puts the job on the maintenance queue; a reap already waiting makes another
// pointless.
func (RunReapArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: ReapEvery}}
}

// RunReapWorker works RunReapArgs.
type RunReapWorker struct {
	river.WorkerDefaults[RunReapArgs]
	runs *run.Service
}

// Work re-enqueues every run whose lease expired.
func (w *RunReapWorker) Work(ctx context.Context, _ *river.Job[RunReapArgs]) error {
	if w.runs == nil {
		return nil
	}
	_, err := w.runs.ReapExpired(ctx)
	return err
}
