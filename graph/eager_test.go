package graph_test

import (
	"context"
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// eagerJob is the River row of a run's job.
type eagerJob struct {
	State       string
	Attempt     int
	Eager       bool // inserted running in sendMessage's transaction (attempted when created)
	AttemptedBy []string
	Finalized   bool
	Errors      int
}

func (c *chatEnv) eagerJob(t *testing.T, runID string) eagerJob {
	t.Helper()
	var j eagerJob
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT j.state, j.attempt, j.attempted_at = j.created_at, j.attempted_by,
				j.finalized_at IS NOT NULL, coalesce(array_length(j.errors, 1), 0)
			FROM river_job j JOIN runs r ON r.job_id = j.id WHERE r.id = $1`, approvalUUID(t, "Run", runID)).
			Scan(&j.State, &j.Attempt, &j.Eager, &j.AttemptedBy, &j.Finalized, &j.Errors))
	})
	return j
}

// apiOnly starts a second process on c's database that takes requests and works no job (its
// turns go through River, to c's process).
func (c *chatEnv) apiOnly(t *testing.T) *apptest.Env {
	t.Helper()
	cfg := c.App.Config
	return apptest.Start(t, apptest.Options{NoWork: true, DatabaseURL: c.OwnerURL, Env: map[string]string{
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(cfg.MasterKey), "AGENTRY_REDIS_PREFIX": cfg.RedisPrefix,
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": c.llm.BaseURL(),
	}})
}

// sendVia is send through env, another process on c's database (apiOnly).
func (c *chatEnv) sendVia(t *testing.T, env *apptest.Env, conv, content string) string {
	t.Helper()
	var out struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	env.Do(t, c.s.AccessToken, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`,
		map[string]any{"in": map[string]any{"conversationId": conv, "content": content}}).Decode(t, &out)
	return out.SendMessage.Run.ID
}

// TestChatTurnWorkedByTheProcessThatTookIt: a process that takes messages and works chat turns
// starts a turn's job itself when sendMessage commits (jobs.Eager): the job is inserted running,
// attempted by this process's River client, and ends completed as River would end it.
func TestChatTurnWorkedByTheProcessThatTookIt(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("Done.")) })
	s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	var j eagerJob
	require.Eventually(t, func() bool { j = c.eagerJob(t, s.RunID); return j.Finalized }, 10*time.Second, 10*time.Millisecond, "the job's row was not finished")
	require.Equal(t, eagerJob{State: "completed", Attempt: 1, Eager: true, AttemptedBy: []string{c.App.River.ID()}, Finalized: true}, j)
}

// TestEagerTurnRetriedThroughRiver: an eagerly worked attempt that fails leaves its job
// retryable, as River would, and River's next attempt finishes the turn.
func TestEagerTurnRetriedThroughRiver(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.Enqueue(llmtest.Error(500, "overloaded"))
	c.llm.Enqueue(llmtest.Stream(llmtest.Text("Second time lucky.")))
	s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	var j eagerJob
	require.Eventually(t, func() bool { j = c.eagerJob(t, s.RunID); return j.Finalized }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "completed", j.State)
	require.Equal(t, 2, j.Attempt, "River fetched the second attempt")
	require.Len(t, j.AttemptedBy, 2)
	require.Equal(t, 1, j.Errors, "the first attempt's error is on the job")
}

// TestEagerTurnCancelledFromAnotherProcess: a chat turn worked eagerly by one process stops at
// once when another process (with no workers) cancels it: the cancel reaches the working
// process through Postgres (agentry_job_cancel), which closes the model stream.
func TestEagerTurnCancelledFromAnotherProcess(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.Text("first words"), llmtest.Delay(30*time.Second), llmtest.Text("never sent"))
	})
	other := c.apiOnly(t)
	s, _ := c.send(t, c.conversation(t, nil), "go", nil)
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "RUNNING" }, 10*time.Second, 10*time.Millisecond)
	require.True(t, c.eagerJob(t, s.RunID).Eager, "the turn is worked by the process that took it")
	time.Sleep(100 * time.Millisecond) // the model stream is open
	var out struct{ CancelRun struct{ Status string } }
	other.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID}).Decode(t, &out)
	require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the model stream was not closed")
	r := c.waitRun(t, s.RunID, 5*time.Second)
	require.Equal(t, "CANCELLED", r.Status)
	require.Eventually(t, func() bool { return c.eagerJob(t, s.RunID).Finalized }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, []string{"completed", "cancelled"}, c.eagerJob(t, s.RunID).State)
}

// TestEagerTurnStoppedWithItsProcess: stopping a process that works a chat turn eagerly cancels
// the attempt once the stop's grace ends and puts its job back available, the attempt not
// counted and no error recorded, for another process to take up, as River's StopAndCancel
// does with the jobs it works; a stopping process starts no turn itself.
func TestEagerTurnStoppedWithItsProcess(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.Text("first words"), llmtest.Delay(30*time.Second), llmtest.Text("never sent"))
	})
	s, _ := c.send(t, c.conversation(t, nil), "go", nil)
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "RUNNING" }, 10*time.Second, 10*time.Millisecond)
	require.True(t, c.eagerJob(t, s.RunID).Eager)
	grace, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.NoError(t, c.App.StopWork(grace, 5*time.Second))
	require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the model stream was not closed")
	j := c.eagerJob(t, s.RunID)
	require.Equal(t, "available", j.State, "left for another process to take up")
	require.Equal(t, 0, j.Attempt, "the interrupted attempt is not counted")
	require.Equal(t, 0, j.Errors)
	require.Nil(t, c.App.Eager.Claim(), "a stopped process claims no turn")
}

// TestEagerTurnAcquiredByItsMessage: a chat turn worked by the process that took its message
// is acquired, and its first model call reserved, by sendMessage's transaction, and the model is
// asked while that transaction's COMMIT is on its way (held here by a deferred trigger on a lock
// the test owns): nobody else sees the run meanwhile, and the turn completes once the commit
// does. A message whose transaction does not commit leaves nothing (no run, job, reservation
// or reply), its model stream is dropped unread, its place is free again, and the next
// message's turn runs.
func TestEagerTurnAcquiredByItsMessage(t *testing.T) {
	t.Parallel()
	c, owner := budgetedWithOwnerSQL(t,
		`CREATE FUNCTION test_send_gate() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				PERFORM pg_advisory_xact_lock(7303);
				IF NEW.content = 'do not store' THEN RAISE EXCEPTION 'this message does not commit'; END IF;
				RETURN NULL;
			END $$`,
		`CREATE CONSTRAINT TRIGGER test_send_gate AFTER INSERT ON messages DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (NEW.role = 'USER') EXECUTE FUNCTION test_send_gate()`,
	)
	ctx := context.Background()
	asked := make(chan struct{}, 4)
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		asked <- struct{}{}
		return llmtest.Stream(llmtest.Text("Done."))
	})
	waitAsked := func() {
		t.Helper()
		select {
		case <-asked:
		case <-time.After(15 * time.Second):
			t.Fatal("the model was not asked while the message's COMMIT waited")
		}
	}
	conv := c.conversation(t, nil)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the lock's release below (cleanups run last first)
	send := func(content string) <-chan *apptest.Response {
		done := make(chan *apptest.Response, 1)
		subGo(t, &wg, "sendMessage", func(tb testing.TB) {
			done <- c.Do(tb, c.s.AccessToken, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id status } } }`,
				map[string]any{"in": map[string]any{"conversationId": conv, "content": content}})
		})
		return done
	}
	held := false
	hold := func() {
		_, err := owner.Exec(ctx, `SELECT pg_advisory_lock(7303)`)
		require.NoError(t, err)
		held = true
	}
	release := func() {
		_, err := owner.Exec(ctx, `SELECT pg_advisory_unlock(7303)`)
		require.NoError(t, err)
		held = false
	}
	t.Cleanup(func() { // a failed check leaves the message's commit held otherwise
		if held {
			release()
		}
	})

	hold()
	first := send("hello")
	waitAsked()
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs`), "the run is not committed yet")
	require.Zero(t, c.count(t, `SELECT count(*) FROM reservations`), "nor its reservation")
	release()
	res := <-first
	require.Empty(t, res.Errors)
	var out struct {
		SendMessage struct{ Run struct{ ID, Status string } }
	}
	res.Decode(t, &out)
	require.Equal(t, "RUNNING", out.SendMessage.Run.Status, "acquired by the message's transaction")
	runID := out.SendMessage.Run.ID
	r := c.waitRun(t, runID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.True(t, c.eagerJob(t, runID).Eager)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM reservations WHERE run_id = $1 AND call_index = 0 AND status = 'SETTLED'`, approvalUUID(t, "Run", runID)))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'execution.started'`, approvalUUID(t, "Run", runID)),
		"one acquisition")
	// The job gives its place back once its row is finished, after its run.
	require.Eventually(t, func() bool { return c.App.Eager.Busy() == 0 }, 10*time.Second, 5*time.Millisecond)

	hold()
	failed := send("do not store")
	waitAsked()
	release()
	res = <-failed
	require.NotEmpty(t, res.Errors, "the message's transaction failed")
	require.Eventually(t, func() bool { return c.App.Eager.Busy() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the failed message's job ended and gave its place back")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs`), "no run of the failed message")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages WHERE role = 'USER'`))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages WHERE role = 'ASSISTANT'`), "the dropped stream stored nothing")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM reservations`))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM river_job WHERE kind = (SELECT j.kind FROM river_job j JOIN runs r ON r.job_id = j.id)`),
		"no job of the failed message")

	s, _ := c.send(t, conv, "again", nil)
	r = c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.True(t, c.eagerJob(t, s.RunID).Eager, "worked eagerly: the failed message's place was given back")
}
