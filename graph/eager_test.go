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
	cfg := c.App.Config
	other := apptest.Start(t, apptest.Options{NoWork: true, DatabaseURL: c.OwnerURL, Env: map[string]string{
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(cfg.MasterKey), "AGENTRY_REDIS_PREFIX": cfg.RedisPrefix,
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": c.llm.BaseURL(),
	}})
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

// TestEagerTurnStartsWhileItsMessageCommits: a chat turn's job starts with sendMessage's
// transaction, before its COMMIT (held here by a deferred trigger on a lock the test owns):
// the worker's acquisition waits on the job's commit lock meanwhile, then finds the run once
// the commit is done. A message whose transaction does not commit leaves nothing: its started
// job finds no run and ends, its place is free again, and the next message's turn runs.
func TestEagerTurnStartsWhileItsMessageCommits(t *testing.T) {
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
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("Done.")) })
	conv := c.conversation(t, nil)
	waiting := func() int { // in this test's database only
		return c.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1634168436::oid AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the lock's release below (cleanups run last first)
	send := func(content string) <-chan *apptest.Response {
		done := make(chan *apptest.Response, 1)
		subGo(t, &wg, "sendMessage", func(tb testing.TB) {
			done <- c.Do(tb, c.s.AccessToken, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`,
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
	require.Eventually(t, func() bool { return waiting() == 1 }, 10*time.Second, 5*time.Millisecond,
		"the turn's acquisition waits for its message's commit")
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs`), "the run is not committed yet")
	release()
	res := <-first
	require.Empty(t, res.Errors)
	var out struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	res.Decode(t, &out)
	r := c.waitRun(t, out.SendMessage.Run.ID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.True(t, c.eagerJob(t, out.SendMessage.Run.ID).Eager)
	// The job gives its place back once its row is finished, after its run: the next one
	// starts early only when no other is running.
	require.Eventually(t, func() bool { return c.App.Eager.Busy() == 0 }, 10*time.Second, 5*time.Millisecond)

	hold()
	failed := send("do not store")
	require.Eventually(t, func() bool { return waiting() == 1 }, 10*time.Second, 5*time.Millisecond)
	release()
	res = <-failed
	require.NotEmpty(t, res.Errors, "the message's transaction failed")
	require.Eventually(t, func() bool { return waiting() == 0 && c.App.Eager.Busy() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the failed message's job ended and gave its place back")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs`), "no run of the failed message")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages WHERE role = 'USER'`))
	// (The first turn's job ends after its run does.)
	require.Eventually(t, func() bool { return c.count(t, `SELECT count(*) FROM river_job WHERE state = 'running'`) == 0 },
		10*time.Second, 5*time.Millisecond, "no job left running")

	s, _ := c.send(t, conv, "again", nil)
	r = c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.True(t, c.eagerJob(t, s.RunID).Eager, "worked eagerly: the failed message's place was given back")
}
