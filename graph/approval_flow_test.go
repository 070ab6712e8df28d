package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/llm/llmtest"
)

// pendingApproval waits for the run to park and returns its pending approval's id and kind.
func (c *chatEnv) pendingApproval(t *testing.T, runID string) (string, string) {
	t.Helper()
	require.Eventually(t, func() bool { return c.run(t, runID).Status == "AWAITING_APPROVAL" }, 15*time.Second, 20*time.Millisecond)
	var out struct {
		Run struct {
			Approvals []struct{ ID, Kind, Status string }
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { approvals { id kind status } } }`, map[string]any{"id": runID}).Decode(t, &out)
	for _, a := range out.Run.Approvals {
		if a.Status == "PENDING" {
			return a.ID, a.Kind
		}
	}
	t.Fatalf("no pending approval: %+v", out.Run.Approvals)
	return "", ""
}

func (c *chatEnv) resolve(t *testing.T, id, decision, note string) {
	t.Helper()
	res := c.Do(t, c.s.AccessToken, `mutation($id: ID!, $d: ApprovalDecision!, $n: String) { resolveApproval(id: $id, decision: $d, note: $n) { status } }`,
		map[string]any{"id": id, "d": decision, "n": note})
	require.Empty(t, res.Errors, "%s", res.Body)
}

// exec runs SQL as the owner, across tenants.
func (c *chatEnv) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(context.Background())
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(context.Background()))
}

func writeThenDone(c *chatEnv, path, content string) {
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		if strings.Count(string(req.Raw), "tool_use_id") > 0 || strings.Contains(string(req.Raw), `"role":"tool"`) {
			return llmtest.Stream(llmtest.Text("finished"))
		}
		return llmtest.Stream(llmtest.ToolCall("w1", "write_file", fmt.Sprintf(`{"path":%q,"content":%q}`, path, content)))
	})
}

func TestApprovalRunsExactlyTheApprovedCall(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	writeThenDone(c, "plan.md", "approved content")
	s, _ := c.send(t, c.conversation(t, nil), "write the plan", nil) // autoExecute is off by default
	id, kind := c.pendingApproval(t, s.RunID)
	require.Equal(t, "tool_call", kind)
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_files`), "nothing ran before the approval")
	require.Eventually(t, func() bool {
		return len(c.Jobs(t, "run", rivertype.JobStateRunning, rivertype.JobStateAvailable)) == 0
	}, 5*time.Second, 20*time.Millisecond, "no worker holds a run that waits for a person")
	c.resolve(t, id, "APPROVE", "")
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, deref(r.Error))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM workspace_files WHERE path = 'plan.md' AND content = 'approved content'`))
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "approval.requested"))
	require.Equal(t, 1, countType(evs, "approval.resolved"))
}

func TestApprovalCannotRunOtherArguments(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "openai")
	writeThenDone(c, "plan.md", "what the user saw")
	s, _ := c.send(t, c.conversation(t, nil), "write the plan", nil)
	id, _ := c.pendingApproval(t, s.RunID)
	// The stored call is changed after the person looked at it.
	c.exec(t, `UPDATE tool_calls SET arguments = '{"path":"plan.md","content":"something else"}'::jsonb`)
	c.resolve(t, id, "APPROVE", "")
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_files`), "a call with other arguments ran on the approval")
	require.Equal(t, "REJECTED", r.ToolCalls[0].Status)
}

func TestApprovalRejectFeedsBack(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	writeThenDone(c, "plan.md", "x")
	s, _ := c.send(t, c.conversation(t, nil), "write the plan", nil)
	id, _ := c.pendingApproval(t, s.RunID)
	c.resolve(t, id, "REJECT", "not now")
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_files`))
	last := c.llm.LastRequest(t)
	require.Contains(t, string(last.Raw), "rejected by the user")
}

// TestApprovalExpiredExecutesNothing: an approval decided after its TTL (the approvals' clock is
// moved past it) is CONFLICT, and the call it was asked for does not run.
func TestApprovalExpiredExecutesNothing(t *testing.T) {
	t.Parallel()
	c := newChatEnvWith(t, "anthropic", map[string]string{"AGENTRY_APPROVAL_TTL": "1m"})
	var skew atomic.Int64
	c.App.Approvals.SetClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	writeThenDone(c, "plan.md", "x")
	s, _ := c.send(t, c.conversation(t, nil), "write the plan", nil)
	id, _ := c.pendingApproval(t, s.RunID)
	skew.Store(int64(time.Minute + time.Second))
	res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { resolveApproval(id: $id, decision: APPROVE) { status } }`, map[string]any{"id": id})
	require.Equal(t, "CONFLICT", res.Code())
	require.Contains(t, res.Errors[0].Message, "expired")
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_files`), "an expired approval executed its call")
	require.Contains(t, string(c.llm.LastRequest(t).Raw), "expired")
}

func (c *chatEnv) runTask(t *testing.T, title, complexity string) string {
	t.Helper()
	var task struct{ CreateTask struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation($t: String!, $c: Complexity) { createTask(input: {title: $t, complexity: $c}) { id } }`,
		map[string]any{"t": title, "c": complexity}).Decode(t, &task)
	var r struct{ RunTask struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { runTask(id: $id) { id } }`, map[string]any{"id": task.CreateTask.ID}).Decode(t, &r)
	return r.RunTask.ID
}

func TestLongTaskConfirmation(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true})
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		if n >= 22 {
			return llmtest.Stream(llmtest.Text("task done"))
		}
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("l%d", n), "list_files", `{}`))
	})
	runID := c.runTask(t, "a long task", "STANDARD")
	id, kind := c.pendingApproval(t, runID)
	require.Equal(t, "continue", kind)
	require.Equal(t, 20, len(sc.requests()), "paused after 20 turns")
	// The run's job ended: no worker holds or will take the run while it waits for a person.
	require.Eventually(t, func() bool {
		return len(c.Jobs(t, "run", rivertype.JobStateRunning, rivertype.JobStateAvailable, rivertype.JobStateRetryable, rivertype.JobStateScheduled)) == 0
	}, 5*time.Second, 20*time.Millisecond, "a run waiting for a person holds no job")
	require.Equal(t, 20, len(sc.requests()), "no turn while waiting")
	c.resolve(t, id, "APPROVE", "")
	r := c.waitRun(t, runID, 20*time.Second)
	require.Equal(t, "COMPLETED", r.Status, deref(r.Error))
	require.Equal(t, "completed", *r.TerminationReason)
	require.Equal(t, 23, len(sc.requests()))
}

func TestLongTaskConfirmationDeclined(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true})
	c.llm.SetDefault(llmtest.Stream(llmtest.ToolCall("l", "list_files", `{}`)))
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("l%d", n), "list_files", `{}`))
	})
	runID := c.runTask(t, "endless", "SIMPLE")
	id, _ := c.pendingApproval(t, runID)
	c.resolve(t, id, "REJECT", "")
	r := c.waitRun(t, runID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Equal(t, "user_stop", *r.TerminationReason)
	require.Equal(t, 20, len(sc.requests()))
}

func TestTerminatorDurationWithInjectedClock(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true})
	start := time.Now()
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("l%d", n), "list_files", `{}`))
	})
	// After the third call the clock jumps past the 30-minute limit of a STANDARD task run.
	c.App.Executor.SetClock(func() time.Time {
		if len(sc.requests()) >= 3 {
			return start.Add(31 * time.Minute)
		}
		return time.Now()
	})
	runID := c.runTask(t, "slow", "STANDARD")
	r := c.waitRun(t, runID, 15*time.Second)
	require.Equal(t, "max_duration", *r.TerminationReason)
	require.Equal(t, 3, len(sc.requests()))
}

var _ = json.Marshal

// A step whose calls need a person asks about them one at a time before any of them runs, then
// runs the step as a whole: a read that needs nobody and the approved writes commit together,
// the rejected write is reported to the model without running.
func TestApprovalStepRunsWhenEveryCallIsDecided(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		if strings.Contains(string(req.Raw), "tool_use_id") {
			return llmtest.Stream(llmtest.Text("finished"))
		}
		return llmtest.Stream(
			llmtest.ToolCall("w1", "write_file", `{"path":"one.txt","content":"1"}`),
			llmtest.ToolCall("l1", "list_files", `{}`),
			llmtest.ToolCall("w2", "write_file", `{"path":"two.txt","content":"2"}`),
			llmtest.ToolCall("w3", "write_file", `{"path":"three.txt","content":"3"}`),
		)
	})
	s, _ := c.send(t, c.conversation(t, nil), "write three files", nil) // autoExecute is off by default
	var asked []string
	for _, decision := range []string{"APPROVE", "REJECT", "APPROVE"} {
		id, kind := c.pendingApproval(t, s.RunID)
		require.Equal(t, "tool_call", kind)
		require.NotContains(t, asked, id)
		asked = append(asked, id)
		require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_files`), "a call ran before the step's questions were all answered")
		require.Zero(t, c.count(t, `SELECT count(*) FROM tool_calls WHERE status NOT IN ('PENDING')`))
		c.resolve(t, id, decision, "")
	}
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, deref(r.Error))
	status := map[string]string{}
	for _, tc := range r.ToolCalls {
		status[tc.Name+":"+deref(tc.Output)+deref(tc.Error)] = tc.Status
	}
	require.Equal(t, 2, c.count(t, `SELECT count(*) FROM workspace_files WHERE path IN ('one.txt', 'three.txt')`))
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_files WHERE path = 'two.txt'`), "the rejected call did not run")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM tool_calls WHERE status = 'REJECTED'`), "%v", status)
	require.Equal(t, 3, c.count(t, `SELECT count(*) FROM tool_calls WHERE status = 'COMPLETED'`), "%v", status)
	// The step's changes were one transaction: the writes' versions have one creation time.
	require.Equal(t, 1, c.count(t, `SELECT count(DISTINCT created_at) FROM workspace_file_versions`))
}
