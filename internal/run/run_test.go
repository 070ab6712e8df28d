package run_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
)

// fakeJobs records inserted jobs.
type fakeJobs struct{ next int64 }

func (f *fakeJobs) InsertTx(context.Context, pgx.Tx, river.JobArgs, *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	f.next++
	return &rivertype.JobInsertResult{Job: &rivertype.JobRow{ID: f.next}}, nil
}

func (f *fakeJobs) JobCancelTx(context.Context, pgx.Tx, int64) (*rivertype.JobRow, error) {
	return &rivertype.JobRow{}, nil
}

func (f *fakeJobs) JobList(context.Context, *river.JobListParams) (*river.JobListResult, error) {
	return &river.JobListResult{}, nil
}

func setup(t *testing.T) (*db.DB, *run.Service, dbsqlc.Run) {
	t.Helper()
	d, _ := dbtest.Open(t)
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	svc := run.NewService(d, events.NewPublisher(rdb, fmt.Sprintf("runtest%d:", time.Now().UnixNano()), log), log)
	svc.SetInserter(&fakeJobs{})
	ctx := context.Background()
	tenant, user := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	var r dbsqlc.Run
	require.NoError(t, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenant, Name: "t"}); err != nil {
			return err
		}
		if _, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: user, Email: user.String() + "@example.com"}); err != nil {
			return err
		}
		var err error
		r, err = tx.Q.RunInsert(ctx, dbsqlc.RunInsertParams{TenantID: tenant, ID: uuid.Must(uuid.NewV7()), UserID: user, Kind: run.KindTask, Status: run.StatusQueued, MaxAttempts: 4})
		if err != nil {
			return err
		}
		return svc.Enqueue(ctx, tx, r)
	}))
	require.NoError(t, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
		var err error
		r, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenant, ID: r.ID})
		return err
	}))
	return d, svc, r
}

// TestStaleAttemptIsFenced: a worker whose run was taken over (a newer attempt acquired it) can
// write nothing.
func TestStaleAttemptIsFenced(t *testing.T) {
	t.Parallel()
	_, svc, r := setup(t)
	ctx := context.Background()
	old, err := svc.Acquire(ctx, r.TenantID, r.ID, "worker-a", *r.JobID)
	require.NoError(t, err)
	// The worker "pauses"; its lease is taken over (the reaper re-enqueues, a new job acquires).
	newer, err := svc.Acquire(ctx, r.TenantID, r.ID, "worker-b", *r.JobID)
	require.NoError(t, err)
	require.Greater(t, newer.Attempt, old.Attempt)

	wrote := false
	err = svc.InFence(ctx, old, func(context.Context, *db.Tx) error { wrote = true; return nil })
	require.ErrorIs(t, err, run.ErrFenced)
	require.False(t, wrote, "a stale attempt's write ran")
	_, err = svc.Finish(ctx, old, run.Outcome{Status: run.StatusCompleted})
	require.ErrorIs(t, err, run.ErrFenced)

	// The current attempt writes.
	require.NoError(t, svc.InFence(ctx, newer, func(context.Context, *db.Tx) error { return nil }))
	fin, err := svc.Finish(ctx, newer, run.Outcome{Status: run.StatusCompleted, TerminationReason: "completed"})
	require.NoError(t, err)
	require.Equal(t, run.StatusCompleted, fin.Status)
}

// TestAcquireOnlyByCurrentJob: a job the run was handed away from (the reaper enqueued a
// continuation) cannot take the run back.
func TestAcquireOnlyByCurrentJob(t *testing.T) {
	t.Parallel()
	_, svc, r := setup(t)
	_, err := svc.Acquire(context.Background(), r.TenantID, r.ID, "w", *r.JobID+1000)
	require.ErrorIs(t, err, run.ErrFenced)
}

// TestReaperTakesOverExpiredLease: a run whose worker stopped renewing its lease is fenced and
// re-enqueued; the old worker can no longer write.
func TestReaperTakesOverExpiredLease(t *testing.T) {
	t.Parallel()
	d, svc, r := setup(t)
	ctx := context.Background()
	l, err := svc.Acquire(ctx, r.TenantID, r.ID, "dead-worker", *r.JobID)
	require.NoError(t, err)
	n, err := svc.ReapExpired(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a live lease is left alone")

	// The worker dies: its lease runs out.
	require.NoError(t, d.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, r.ID)
		return err
	}))
	n, err = svc.ReapExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var after dbsqlc.Run
	require.NoError(t, d.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		after, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: r.TenantID, ID: r.ID})
		return err
	}))
	require.Equal(t, run.StatusQueued, after.Status)
	require.Greater(t, after.Attempt, l.Attempt)
	require.NotEqual(t, *r.JobID, *after.JobID, "a continuation job was enqueued")
	require.ErrorIs(t, svc.InFence(ctx, l, func(context.Context, *db.Tx) error { return nil }), run.ErrFenced)
}
