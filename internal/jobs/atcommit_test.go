package jobs

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/run"
)

// A run's job inserted with the COMMIT (run.Service.JobAtCommit) is the row River's client
// inserts with the same options, and River's producer hears of it at once: with a poll once an
// hour, only the insert notification can make it fetch the job.
func TestJobAtCommitIsRiversJob(t *testing.T) {
	t.Parallel()
	d, ownerURL := dbtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	worked := make(chan int64, 4)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[run.Args]) error {
		worked <- job.ID
		return nil
	}))
	client, err := river.NewClient(riverpgxv5.New(d.Pool), &river.Config{
		Logger:        slog.New(slog.DiscardHandler),
		FetchCooldown: run.FetchCooldown,
		Queues:        map[string]river.QueueConfig{run.QueueChat: {MaxWorkers: 2, FetchCooldown: run.FetchCooldown, FetchPollInterval: time.Hour}},
		Workers:       workers,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
	})
	wait := func(id int64) {
		t.Helper()
		select {
		case got := <-worked:
			require.Equal(t, id, got)
		case <-ctx.Done():
			t.Fatalf("job %d was not worked: River's producer did not hear of it", id)
		}
	}

	tenantID, runID := uuid.New(), uuid.New()
	// River's client inserts the first job; once it is worked, the producer has made its
	// first fetch and waits for notifications.
	var byClient int64
	require.NoError(t, d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		res, err := client.InsertTx(ctx, tx.Tx, run.Args{TenantID: tenantID, RunID: runID}, &river.InsertOpts{MaxAttempts: 4, Queue: run.QueueOf(run.KindChatTurn)})
		byClient = res.Job.ID
		return err
	}))
	wait(byClient)

	runs := run.NewService(d, nil, slog.New(slog.DiscardHandler))
	var atCommit int64
	require.NoError(t, d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		if atCommit, err = runs.NextJobID(ctx, tx); err != nil {
			return err
		}
		fns, err := runs.JobAtCommit(tenantID, runID, run.KindChatTurn, 4, atCommit, nil)
		if err != nil {
			return err
		}
		require.Len(t, fns, 2, "the job and its notification")
		return tx.CommitWith(ctx, fns...)
	}))
	wait(atCommit)

	// Both rows alike, but for what names and times them.
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	row := func(id int64) []any {
		vals := make([]any, 11)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, conn.QueryRow(ctx, `SELECT args, kind, max_attempts, metadata, priority, queue, state::text, tags, unique_key, unique_states, attempt
			FROM river_job WHERE id = $1`, id).Scan(ptrs...))
		return vals
	}
	// The worker has returned, but River records a job's completion afterwards, in batches:
	// compare once both are recorded.
	for _, id := range []int64{byClient, atCommit} {
		var state string
		for state != "completed" {
			require.NoError(t, conn.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, id).Scan(&state))
			if state != "completed" {
				select {
				case <-ctx.Done():
					t.Fatalf("job %d still %s: River did not record its completion", id, state)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}
	require.Equal(t, row(byClient), row(atCommit))
}
