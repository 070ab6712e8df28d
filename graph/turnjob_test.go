package graph_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/run"
)

// apiOnly starts a second process on c's database that takes requests and works no job (its
// turns go through River, to c's process).
func (c *chatEnv) apiOnly(t *testing.T) *apptest.Env {
	t.Helper()
	return apptest.Start(t, apptest.Options{NoWork: true, DatabaseURL: c.OwnerURL, Env: c.sharedEnv()})
}

// sharedEnv is the configuration another process needs to share c's database, Redis namespace,
// keys and model server.
func (c *chatEnv) sharedEnv() map[string]string {
	cfg := c.App.Config
	return map[string]string{
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(cfg.MasterKey), "AGENTRY_REDIS_PREFIX": cfg.RedisPrefix,
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": c.llm.BaseURL(),
	}
}

// finishedJobOf is the River job of the run with global id runID, waited for until River has finished
// it (finalized).
func (c *chatEnv) finishedJobOf(t *testing.T, runID string) *rivertype.JobRow {
	t.Helper()
	var j *rivertype.JobRow
	require.Eventually(t, func() bool {
		j = c.JobOfRun(t, approvalUUID(t, "Run", runID))
		return j != nil && j.FinalizedAt != nil
	}, 10*time.Second, 10*time.Millisecond, "River did not finish the run's job")
	return j
}

// riverOnly is the configuration of a process that works no chat turn itself: every turn it
// takes goes through River (AGENTRY_LOCAL_TURNS=0).
var riverOnly = map[string]string{"AGENTRY_LOCAL_TURNS": "0"}

// paths are the two ways a chat turn is worked: by the process that took its message (local)
// and through River's queue.
var paths = []struct {
	name string
	env  map[string]string
}{{"local", nil}, {"river", riverOnly}}

// onPaths runs test as a parallel subtest on each path, with the path's configuration.
func onPaths(t *testing.T, test func(t *testing.T, env map[string]string)) {
	t.Helper()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			test(t, p.env)
		})
	}
}

// TestChatTurnIsARiverJob: a chat turn that the process taking it does not work itself is a
// River job on the chat queue, inserted with its message, worked once by this process's client
// and completed by River.
func TestChatTurnIsARiverJob(t *testing.T) {
	t.Parallel()
	c := newChatEnvWith(t, "anthropic", riverOnly)
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("Done.")) })
	s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	require.Equal(t, "QUEUED", s.Status, "the run is acquired once a worker takes its job")
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	j := c.finishedJobOf(t, s.RunID)
	require.Equal(t, rivertype.JobStateCompleted, j.State)
	require.Equal(t, "chat", j.Queue)
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, []string{c.App.River.ID()}, j.AttemptedBy)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs WHERE job_id = $1`, j.ID), "the run names its job")
}

// TestChatTurnWorkedWhereItWasSent: a process that serves the API and works jobs works the
// chat turns it takes itself, with no River job: the run is claimed with its message and
// acquired once that commits.
func TestChatTurnWorkedWhereItWasSent(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("Done.")) })
	s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	runID := approvalUUID(t, "Run", s.RunID)
	require.Nil(t, c.JobOfRun(t, runID), "no River job")
	require.Empty(t, c.Jobs(t, "run"))
	require.Equal(t, 1, c.count(t, `SELECT attempt FROM runs WHERE id = $1 AND job_id IS NULL AND lease_owner IS NULL`, runID))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'execution.started'`, runID), "one acquisition")
}

// TestChatTurnRetriedThroughRiver: an attempt that fails with a retryable error leaves the turn
// to River, whose next attempt finishes it. Through River the job itself is retried; worked
// where it was sent, the run is handed to River with a job for its next attempt (the job's
// first, the run's second).
func TestChatTurnRetriedThroughRiver(t *testing.T) {
	t.Parallel()
	onPaths(t, func(t *testing.T, env map[string]string) {
		c := newChatEnvWith(t, "anthropic", env)
		c.llm.Enqueue(llmtest.Error(500, "overloaded"))
		c.llm.Enqueue(llmtest.Stream(llmtest.Text("Second time lucky.")))
		s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
		r := c.waitRun(t, s.RunID, 15*time.Second)
		require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
		j := c.finishedJobOf(t, s.RunID)
		require.Equal(t, rivertype.JobStateCompleted, j.State)
		runID := approvalUUID(t, "Run", s.RunID)
		require.Equal(t, 2, c.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'execution.started'`, runID))
		if env != nil {
			require.Equal(t, 2, j.Attempt, "River fetched the second attempt")
			require.Len(t, j.Errors, 1, "the first attempt's error is on the job")
			return
		}
		require.Equal(t, "chat", j.Queue)
		require.Equal(t, 1, j.Attempt, "River's first attempt of the job")
		var args run.Args
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &args))
		require.Equal(t, int32(1), args.Prior, "the job knows the run had one attempt before it")
		require.Equal(t, c.count(t, `SELECT max_attempts FROM runs WHERE id = $1`, runID)-1, j.MaxAttempts, "the job has the attempts the run has left")
		require.Equal(t, 1, c.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'task.retrying' AND data->>'attempt' = '1'`, runID))
	})
}

// TestChatTurnCancelledFromAnotherProcess: a chat turn worked by one process stops at once when
// another process (with no workers) cancels it, whether the turn is a River job (River's cancel
// reaches the working client) or worked by the process that took it (the cancel's signal
// through Redis does): the attempt's context is cancelled and the model stream closed.
func TestChatTurnCancelledFromAnotherProcess(t *testing.T) {
	t.Parallel()
	onPaths(t, func(t *testing.T, env map[string]string) {
		c := newChatEnvWith(t, "anthropic", env)
		c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
			return llmtest.Stream(llmtest.Text("first words"), llmtest.Delay(30*time.Second), llmtest.Text("never sent"))
		})
		other := c.apiOnly(t)
		s, _ := c.send(t, c.conversation(t, nil), "go", nil)
		require.Eventually(t, func() bool { return c.llm.Calls() == 1 }, 10*time.Second, 10*time.Millisecond, "the model stream is open")
		var out struct{ CancelRun struct{ Status string } }
		other.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID}).Decode(t, &out)
		require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the model stream was not closed")
		r := c.waitRun(t, s.RunID, 5*time.Second)
		require.Equal(t, "CANCELLED", r.Status)
		if env == nil {
			require.Nil(t, c.JobOfRun(t, approvalUUID(t, "Run", s.RunID)), "no job: the turn was worked where it was sent")
			return
		}
		require.Contains(t, []rivertype.JobState{rivertype.JobStateCompleted, rivertype.JobStateCancelled}, c.finishedJobOf(t, s.RunID).State)
	})
}

// TestChatTurnStoppedWithItsProcess: stopping a process that works a chat turn cancels the
// attempt once the stop's grace ends, and the turn is left to River with its job available, the
// attempt not counted (River's StopAndCancel puts a job back so; a turn worked where it was sent
// gets a job of its own); another process takes the turn up and finishes it.
func TestChatTurnStoppedWithItsProcess(t *testing.T) {
	t.Parallel()
	onPaths(t, func(t *testing.T, env map[string]string) {
		c := newChatEnvWith(t, "anthropic", env)
		c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
			return llmtest.Stream(llmtest.Text("first words"), llmtest.Delay(30*time.Second), llmtest.Text("never sent"))
		})
		s, _ := c.send(t, c.conversation(t, nil), "go", nil)
		require.Eventually(t, func() bool { return c.llm.Calls() == 1 }, 10*time.Second, 10*time.Millisecond, "the model stream is open")
		grace, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		require.NoError(t, c.App.StopWork(grace, 5*time.Second))
		require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the model stream was not closed")
		j := c.JobOfRun(t, approvalUUID(t, "Run", s.RunID))
		require.NotNil(t, j)
		require.Equal(t, rivertype.JobStateAvailable, j.State, "left for another process to take up")
		require.Zero(t, j.Attempt, "the interrupted attempt is not counted")
		var args run.Args
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &args))
		require.Zero(t, args.Prior, "the interrupted attempt is not counted")

		next := apptest.Start(t, apptest.Options{DatabaseURL: c.OwnerURL, Env: c.sharedEnv()})
		r := c.waitRun(t, s.RunID, 15*time.Second)
		require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
		by := []string{c.App.River.ID(), next.App.River.ID()}
		if env == nil {
			by = by[1:] // the first attempt was this process's own, outside River
		}
		require.Equal(t, by, c.finishedJobOf(t, s.RunID).AttemptedBy, "worked by the other process after this one")
	})
}

// TestChatTurnCallsTheModelAfterItsLeaseCommits: a worker asks the model only once the
// transaction that acquires the run has committed (a River job's, or sendMessage's for a turn
// worked where it was sent). A deferred trigger holds that transaction's COMMIT on a lock the
// test owns: while it waits, the model is not asked; once it is released the turn goes on, and
// at the moment the model is asked the run reads RUNNING to everyone.
func TestChatTurnCallsTheModelAfterItsLeaseCommits(t *testing.T) {
	t.Parallel()
	onPaths(t, callsTheModelAfterItsLeaseCommits)
}

func callsTheModelAfterItsLeaseCommits(t *testing.T, env map[string]string) {
	c, owner := budgetedWithOwnerSQL(t, env,
		`CREATE FUNCTION test_acquire_gate() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_xact_lock(7302); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER test_acquire_gate AFTER UPDATE ON runs DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (OLD.status = 'QUEUED' AND NEW.status = 'RUNNING') EXECUTE FUNCTION test_acquire_gate()`,
		`SELECT pg_advisory_lock(7302)`,
	)
	ctx := context.Background()
	statusAtAsk := make(chan string, 4)
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		status := "unknown"
		if conn, err := pgx.Connect(ctx, c.OwnerURL); err == nil {
			_ = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`); err != nil {
					return err
				}
				return tx.QueryRow(ctx, `SELECT status FROM runs ORDER BY id DESC LIMIT 1`).Scan(&status)
			})
			_ = conn.Close(ctx)
		}
		statusAtAsk <- status
		return llmtest.Stream(llmtest.Text("Answered."))
	})
	conv := c.conversation(t, nil)
	sentCh := make(chan sent, 1)
	go func() { // sendMessage itself waits when it acquires the run
		s, _ := c.send(t, conv, "hello", nil)
		sentCh <- s
	}()
	// The worker's acquisition waits at its COMMIT for the test's lock.
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 7302 AND NOT granted`) == 1
	}, 15*time.Second, 10*time.Millisecond, "the acquisition did not reach its COMMIT")
	require.Zero(t, c.llm.Calls(), "the model was asked before the acquisition committed")
	_, err := owner.Exec(ctx, `SELECT pg_advisory_unlock(7302)`)
	require.NoError(t, err)
	s := <-sentCh
	require.NotEmpty(t, s.RunID)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.Equal(t, "RUNNING", <-statusAtAsk, "the model was asked before the lease was visible")
	runID := approvalUUID(t, "Run", s.RunID)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM reservations WHERE run_id = $1 AND status = 'SETTLED'`, runID))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'execution.started'`, runID), "one acquisition")
}

// TestAcquisitionThatFailsToCommitAsksNothing: when the COMMIT of the worker's transaction that
// acquires a chat turn fails, the attempt ends before any model call: nothing of the acquisition
// is left, River retries the job, and its next attempt runs the turn once.
func TestAcquisitionThatFailsToCommitAsksNothing(t *testing.T) {
	t.Parallel()
	onPaths(t, acquisitionThatFailsToCommit)
}

// acquisitionThatFailsToCommit is TestAcquisitionThatFailsToCommitAsksNothing in a process with
// configuration env. A turn worked where it was sent is acquired in sendMessage's transaction:
// the failed acquisition fails the message, which stores nothing, and the message sent again
// (same idempotency key) runs once.
func acquisitionThatFailsToCommit(t *testing.T, env map[string]string) {
	c, _ := budgetedWithOwnerSQL(t, env,
		`CREATE SEQUENCE test_acquire_fail`,
		`CREATE FUNCTION test_acquire_fail() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF nextval('test_acquire_fail') = 1 THEN RAISE EXCEPTION 'the first acquisition does not commit'; END IF; RETURN NULL; END $$`,
		`GRANT USAGE ON SEQUENCE test_acquire_fail TO PUBLIC`,
		`CREATE CONSTRAINT TRIGGER test_acquire_fail AFTER UPDATE ON runs DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (OLD.status = 'QUEUED' AND NEW.status = 'RUNNING') EXECUTE FUNCTION test_acquire_fail()`,
	)
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("Answered.")) })
	conv := c.conversation(t, nil)
	key := map[string]any{"idempotencyKey": "once"}
	if env == nil {
		_, res := c.send(t, conv, "hello", key)
		require.NotEmpty(t, res.Errors, "the message whose acquisition failed is refused")
		require.Zero(t, c.count(t, `SELECT count(*) FROM runs`), "nothing stored")
		require.Zero(t, c.count(t, `SELECT count(*) FROM messages`), "nothing stored")
	}
	s, _ := c.send(t, conv, "hello", key)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.Equal(t, 1, c.llm.Calls(), "the failed acquisition asked nothing")
	runID := approvalUUID(t, "Run", s.RunID)
	require.Equal(t, 1, c.count(t, `SELECT attempt FROM runs WHERE id = $1`, runID), "the failed acquisition left no attempt behind")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'ASSISTANT'`, runID))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM reservations WHERE run_id = $1`, runID), "one reservation, settled")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM reservations WHERE run_id = $1 AND status = 'SETTLED'`, runID))
	if env == nil {
		require.Nil(t, c.JobOfRun(t, runID), "worked where it was sent: no job")
		return
	}
	require.Equal(t, 2, c.finishedJobOf(t, s.RunID).Attempt, "River retried the job")
}
