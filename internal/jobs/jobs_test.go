package jobs

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// seedTokens makes n tenants, each with one user and refresh tokens expiring at now+offset for
// each offset, and returns the ids of the tokens the purge must keep and must delete.
func seedTokens(t *testing.T, d *db.DB, n int, offsets []time.Duration) (keep, purge map[uuid.UUID]uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	keep, purge = map[uuid.UUID]uuid.UUID{}, map[uuid.UUID]uuid.UUID{}
	now := time.Now()
	for i := range n {
		tenantID := uuid.New()
		err := d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenantID, Name: fmt.Sprintf("tenant %d", i)}); err != nil {
				return err
			}
			u, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: uuid.New(), Email: fmt.Sprintf("u%d-%s@example.com", i, tenantID)})
			if err != nil {
				return err
			}
			for _, off := range offsets {
				hash := make([]byte, 32)
				_, _ = rand.Read(hash)
				id := uuid.New()
				if err := tx.Q.RefreshTokenInsert(ctx, dbsqlc.RefreshTokenInsertParams{
					TenantID: tenantID, ID: id, FamilyID: uuid.New(), UserID: u.ID, TokenHash: hash, ExpiresAt: now.Add(off),
				}); err != nil {
					return err
				}
				if off < -7*24*time.Hour {
					purge[id] = tenantID
				} else {
					keep[id] = tenantID
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	return keep, purge
}

// remaining returns every refresh token left, by id, with its tenant.
func remaining(t *testing.T, d *db.DB) map[uuid.UUID]uuid.UUID {
	t.Helper()
	out := map[uuid.UUID]uuid.UUID{}
	err := d.InSystemTx(context.Background(), "test: list refresh tokens", func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Query(ctx, "SELECT id, tenant_id FROM refresh_tokens")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, tenant uuid.UUID
			if err := rows.Scan(&id, &tenant); err != nil {
				return err
			}
			out[id] = tenant
		}
		return rows.Err()
	})
	require.NoError(t, err)
	return out
}

// Offsets from now: two long expired (purged), one expired 6 days ago, one about to pass the
// 7-day line but not yet, one live (all kept).
var offsets = []time.Duration{
	-30 * 24 * time.Hour,
	-7*24*time.Hour - time.Hour,
	-7*24*time.Hour + time.Hour,
	-6 * 24 * time.Hour,
	time.Hour,
}

func TestRefreshTokenPurgeWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, ownerURL := dbtest.Open(t)
	keep, purge := seedTokens(t, d, 3, offsets)
	require.Len(t, purge, 6)
	require.Len(t, keep, 9)
	require.Len(t, remaining(t, d), 15)

	// rivertest inserts and works the job inside a transaction on the owner's connection; the
	// worker opens its own system transaction on the application pool.
	pool, err := pgxpool.New(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })

	w := rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{}, &RefreshTokenPurgeWorker{db: d})
	res, err := w.Work(ctx, t, tx, RefreshTokenPurgeArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, QueueMaintenance, res.Job.Queue)

	require.Equal(t, keep, remaining(t, d), "tokens expired for less than 7 days, and live ones, are kept in every tenant")

	// Working it again finds nothing more to delete.
	res, err = w.Work(ctx, t, tx, RefreshTokenPurgeArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, keep, remaining(t, d))
}

// The working client registers the purge worker and enqueues it as a periodic job at start.
func TestClientRunsPurgeOnStart(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	keep, _ := seedTokens(t, d, 2, offsets)

	client, err := NewClient(d, Options{Work: true, Concurrency: 2, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	completed, cancelSub := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer cancelSub()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
	})

	// Other periodic jobs run at start too (the reaper): the purge's own event is awaited.
	for purged := false; !purged; {
		select {
		case ev := <-completed:
			if ev.Job.Kind != (RefreshTokenPurgeArgs{}).Kind() {
				continue
			}
			require.Equal(t, river.EventKindJobCompleted, ev.Kind, "job %s: %v", ev.Job.Kind, ev.Job.Errors)
			require.Equal(t, QueueMaintenance, ev.Job.Queue)
			purged = true
		case <-ctx.Done():
			t.Fatal("the periodic purge did not run at start")
		}
	}
	require.Equal(t, keep, remaining(t, d))
	res, err := client.JobList(ctx, river.NewJobListParams().Kinds((RefreshTokenPurgeArgs{}).Kind()).States(rivertype.JobStateCompleted))
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
}

// leaderArgs is the periodic job of a River client that holds the leadership in
// TestStartEnqueuesReapsFromEveryProcess: only River's leader inserts periodic jobs, so its
// being worked shows the client was elected.
type leaderArgs struct{}

func (leaderArgs) Kind() string { return "test_leader" }

type leaderWorker struct {
	river.WorkerDefaults[leaderArgs]
}

func (leaderWorker) Work(context.Context, *river.Job[leaderArgs]) error { return nil }

// Start enqueues run reaps from every working process, not only from River's leader: with the
// leadership held by another process that enqueues no reaps (like one SIGKILLed while it led,
// until its leadership expires), two clients started with Start enqueue reaps, one job per
// period however many processes insert it, and the reaps are worked.
func TestStartEnqueuesReapsFromEveryProcess(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The other process: started first, it is elected (River's leader inserts its periodic
	// job, which is then worked) and keeps the leadership while it runs.
	workers := river.NewWorkers()
	river.AddWorker(workers, leaderWorker{})
	leader, err := river.NewClient(riverpgxv5.New(d.Pool), &river.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Queues:  map[string]river.QueueConfig{"test_leader": {MaxWorkers: 1}},
		Workers: workers,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return leaderArgs{}, &river.InsertOpts{Queue: "test_leader"}
		}, &river.PeriodicJobOpts{RunOnStart: true})},
	})
	require.NoError(t, err)
	elected, cancelElected := leader.Subscribe(river.EventKindJobCompleted)
	defer cancelElected()
	require.NoError(t, leader.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, leader.Stop(stopCtx))
	})
	select {
	case ev := <-elected:
		require.Equal(t, (leaderArgs{}).Kind(), ev.Job.Kind)
	case <-ctx.Done():
		t.Fatal("the first client was not elected River's leader")
	}

	var clients []*river.Client[pgx.Tx]
	for range 2 {
		client, err := NewClient(d, Options{Work: true, Concurrency: 2, Log: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		clients = append(clients, client)
	}
	completed, cancelSub := clients[0].Subscribe(river.EventKindJobCompleted)
	defer cancelSub()
	started := time.Now()
	for _, client := range clients {
		require.NoError(t, Start(ctx, client, nil))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, client.Stop(stopCtx))
		})
	}

	// River's unique key of a reap is its period of the inserting process's clock: the jobs can
	// be at most one per period this test has touched.
	reaps := func() int {
		res, err := clients[0].JobList(ctx, river.NewJobListParams().Kinds((RunReapArgs{}).Kind()).First(10_000))
		require.NoError(t, err)
		n := len(res.Jobs)
		periods := int(time.Now().UnixNano()/int64(ReapEvery)-started.UnixNano()/int64(ReapEvery)) + 1
		require.LessOrEqual(t, n, periods, "one reap job per period, however many processes insert it")
		return n
	}
	worked := false
	for !worked {
		select {
		case ev := <-completed:
			worked = ev.Job.Kind == (RunReapArgs{}).Kind()
		case <-ctx.Done():
			t.Fatal("no run reap was worked: only River's leader enqueued them")
		}
	}
	// Both processes go on inserting every period: wait for the next period's job.
	for reaps() < 2 {
		select {
		case <-ctx.Done():
			t.Fatal("reaps stopped after the first period")
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The leader is still running: it kept the leadership, and the reaps came from Start.
	select {
	case <-leader.Stopped():
		t.Fatal("the leader stopped")
	default:
	}
}
