package graph_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/run"
)

// TestTeamPhaseEndRacesCancel races a phase's end (the worker's transaction that ends the
// architect's run, which moves the team on) against cancelRun on the team run, many times,
// with no worker: the test plays the phase's worker itself. In the even rounds the phase's end
// holds its run's lock until cancelRun waits for it, the interleaving in which the two took the
// phase run and the team run in opposite orders (a deadlock, 40P01, for one of them); in the
// odd rounds both start at once. Neither may fail, and every round ends with the team run
// CANCELLED, no phase running and no conversation left with an active run.
func TestTeamPhaseEndRacesCancel(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewAnthropicServer(t)
	e := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(),
	}})
	c := &chatEnv{Env: e, llm: srv, model: "anthropic:claude-sonnet-4-5", s: e.SignUp(t, "", "")}
	ctx := context.Background()
	owner, err := pgx.Connect(ctx, c.OwnerURL)
	require.NoError(t, err)
	defer owner.Close(ctx)
	tenantID := approvalUUID(t, "Tenant", c.s.TenantID)

	const rounds = 16
	for i := range rounds {
		forced := i%2 == 0
		tv, res := c.startTeam(t, teamInput(c.conversation(t, nil), fmt.Sprintf("race %d", i), nil))
		require.Empty(t, res.Errors, "%s", res.Body)
		phaseRunID := approvalUUID(t, "Run", tv.Phases[0].Run.ID)
		job := c.JobOfRun(t, phaseRunID)
		require.NotNil(t, job, "round %d: the architect's job", i)
		lease, err := c.App.Runs.Acquire(ctx, tenantID, phaseRunID, "race-test", job.ID)
		require.NoError(t, err)

		holding := make(chan int, 1) // the phase end's backend, once it holds the phase run
		proceed := make(chan struct{})
		ended := make(chan error, 1)
		end := func() {
			ended <- c.App.Runs.InFence(ctx, lease, func(ctx context.Context, tx *db.Tx) error {
				var pid int
				if err := tx.Tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					return err
				}
				holding <- pid
				<-proceed
				if _, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: tenantID, ID: lease.Run.ConversationID.UUID}); err != nil {
					return err
				}
				_, err := c.App.Runs.FinishTx(ctx, tx, lease, run.Outcome{Status: run.StatusCompleted, TerminationReason: "completed"})
				return err
			})
		}
		cancelled := make(chan *apptest.Response, 1)
		cancel := func() {
			cancelled <- c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
		}
		if forced {
			go end()
			pid := <-holding
			go cancel()
			// Wait until cancelRun waits for a lock the phase's end holds.
			deadline := time.Now().Add(20 * time.Second)
			for {
				var n int
				require.NoError(t, owner.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&n))
				if n > 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "round %d: cancelRun never waited for the phase's end", i)
				time.Sleep(2 * time.Millisecond)
			}
			close(proceed)
		} else {
			close(proceed)
			go cancel()
			go end()
		}
		require.NoError(t, <-ended, "round %d: the phase's end", i)
		cres := <-cancelled
		require.Empty(t, cres.Errors, "round %d: cancelRun: %s", i, cres.Body)

		require.Equal(t, "CANCELLED", c.run(t, tv.Run.ID).Status, "round %d", i)
		for _, p := range c.team(t, tv.ID).Phases {
			require.NotEqual(t, "RUNNING", p.Status, "round %d: %s %d is not left running", i, p.Phase, p.Iteration)
			pr := c.run(t, p.Run.ID)
			require.Contains(t, []string{"COMPLETED", "CANCELLED"}, pr.Status, "round %d: the run of %s %d", i, p.Phase, p.Iteration)
		}
		require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE active_run_id IS NOT NULL`), "round %d: a conversation is left busy", i)
	}
}
