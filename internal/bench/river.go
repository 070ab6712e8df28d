package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/jobs"
)

// benchQueue is the bare-River baseline's queue; agentry's client never works it.
const benchQueue = "bench_noop"

// noopArgs is the baseline's job: it does nothing but say when it ran.
type noopArgs struct {
	// Sent is the intended insert time (unix nanoseconds), for pickup latency.
	Sent int64 `json:"sent"`
	// Waiter is the closed-loop worker waiting for the job (-1: none).
	Waiter int `json:"waiter"`
}

func (noopArgs) Kind() string { return "bench_noop" }

func (noopArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: benchQueue} }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	mu     sync.Mutex
	lat    *samples
	waiter []chan struct{}
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	now := time.Now()
	w.mu.Lock()
	lat, waiter := w.lat, w.waiter
	w.mu.Unlock()
	if lat != nil && job.Args.Sent > 0 {
		lat.add(now.Sub(time.Unix(0, job.Args.Sent)))
	}
	if job.Args.Waiter >= 0 && job.Args.Waiter < len(waiter) {
		select {
		case waiter[job.Args.Waiter] <- struct{}{}:
		default:
		}
	}
	return nil
}

// bareRiver is the baseline of the queue measures: a River client with a no-op worker, on
// pools opened like agentry's (same URL, role and size; River's own statements on a queue
// pool, db.OpenQueue) and the chat queue's settings and worker count.
type bareRiver struct {
	db, queue *db.DB
	client    *river.Client[pgx.Tx]
	worker    *noopWorker
}

func startBareRiver(ctx context.Context, e *env) (*bareRiver, error) {
	quiet := slog.New(slog.DiscardHandler)
	d, err := db.Open(ctx, e.dbURL, e.app.Config.DBRole, quiet)
	if err != nil {
		return nil, err
	}
	q, err := db.OpenQueue(ctx, e.dbURL, e.app.Config.DBRole, quiet)
	if err != nil {
		d.Close()
		return nil, err
	}
	w := &noopWorker{}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	b := &bareRiver{db: d, queue: q, worker: w}
	b.client, err = river.NewClient(riverpgxv5.New(q.Pool), &river.Config{
		Logger:               quiet,
		FetchCooldown:        jobs.FetchCooldown,
		Workers:              workers,
		Queues:               map[string]river.QueueConfig{benchQueue: jobs.ChatQueue(e.app.Config.WorkerConcurrency)},
		RescueStuckJobsAfter: 2 * time.Hour,
	})
	if err != nil {
		b.close()
		return nil, fmt.Errorf("bare River client: %w", err)
	}
	if err := b.client.Start(ctx); err != nil {
		b.close()
		return nil, fmt.Errorf("start bare River: %w", err)
	}
	return b, nil
}

// record sets where pickup latencies go and the closed-loop waiters' channels.
func (b *bareRiver) record(lat *samples, waiters int) []chan struct{} {
	ch := make([]chan struct{}, waiters)
	for i := range ch {
		ch[i] = make(chan struct{}, 1)
	}
	b.worker.mu.Lock()
	b.worker.lat, b.worker.waiter = lat, ch
	b.worker.mu.Unlock()
	return ch
}

// insert inserts a job in a transaction of the pool like agentry's own (synchronous commit),
// as sendMessage inserts a chat turn's job; River's own statements use the queue pool, like
// agentry's client (db.OpenQueue).
func (b *bareRiver) insert(ctx context.Context, args noopArgs) error {
	return pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		_, err := b.client.InsertTx(ctx, tx, args, nil)
		return err
	})
}

// pickup inserts bare River jobs at rate for dur (an open loop, like the measures' own) and
// records each one's pickup latency (intended insert -> Work) into lat; jobs not worked within a
// few seconds count as errors.
func (b *bareRiver) pickup(ctx context.Context, rate float64, dur time.Duration, lat *samples) error {
	b.record(lat, 0)
	defer b.record(nil, 0)
	before := lat.count()
	var sent atomic.Int64
	openLoop(ctx, rate, dur, 2*time.Second, func(ctx context.Context, at time.Time) {
		if err := b.insert(ctx, noopArgs{Sent: at.UnixNano(), Waiter: -1}); err != nil {
			lat.errors.Add(1)
			return
		}
		sent.Add(1)
	})
	deadline := time.Now().Add(3 * time.Second)
	for int64(lat.count()-before) < sent.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lat.errors.Add(max(sent.Load()-int64(lat.count()-before), 0))
	return ctx.Err()
}

func (b *bareRiver) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.client.Stop(ctx); err != nil {
		_ = b.client.StopAndCancel(ctx)
	}
	b.close()
}

func (b *bareRiver) close() {
	b.db.Close()
	b.queue.Close()
}
