package graph_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// TestDemoModelCommands: with no model key, the demo model's commands each exercise their
// feature through the API: a write that asks for approval and lands in the workspace, an edit
// and a read, a failure after a change that asks the rollback question, a retry (and a retry
// that then succeeds), and a slow answer that can be cancelled midway.
func TestDemoModelCommands(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{Env: map[string]string{"AGENTRY_RETRY_BASE_DELAY": "50ms"}})
	c := &chatEnv{Env: env, s: env.SignUp(t, "", "")}
	conv := c.conversation(t, nil) // the default model: the demo's
	lastReply := func(t *testing.T, conv string) string {
		t.Helper()
		var out struct {
			Conversation struct {
				Messages struct {
					Edges []struct {
						Node struct{ Role, Content string }
					}
				}
			}
		}
		c.Do(t, c.s.AccessToken, `query($c: ID!) { conversation(id: $c) { messages(last: 1) { edges { node { role content } } } } }`,
			map[string]any{"c": conv}).Decode(t, &out)
		require.Len(t, out.Conversation.Messages.Edges, 1)
		n := out.Conversation.Messages.Edges[0].Node
		require.Equal(t, "ASSISTANT", n.Role)
		return n.Content
	}
	file := func(t *testing.T, path string) string {
		t.Helper()
		var out struct {
			Workspace struct{ File *struct{ Content string } }
		}
		c.Do(t, c.s.AccessToken, `query($p: String!) { workspace { file(path: $p) { content } } }`, map[string]any{"p": path}).Decode(t, &out)
		if out.Workspace.File == nil {
			return ""
		}
		return out.Workspace.File.Content
	}

	// A write asks for approval (autoExecute is off by default), then happens.
	s, _ := c.send(t, conv, "write notes.md: hello from the demo", nil)
	id, kind := c.pendingApproval(t, s.RunID)
	require.Equal(t, "tool_call", kind)
	require.Empty(t, file(t, "notes.md"), "written before the approval")
	c.resolve(t, id, "APPROVE", "")
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 20*time.Second).Status)
	require.Equal(t, "hello from the demo", file(t, "notes.md"))

	// An edit (approved), then a read (read-only: no question), answered with the file.
	s, _ = c.send(t, conv, "edit notes.md: hello -> goodbye then read notes.md", nil)
	id, _ = c.pendingApproval(t, s.RunID)
	c.resolve(t, id, "APPROVE", "")
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Equal(t, []string{"edit_file", "read_file"}, []string{r.ToolCalls[0].Name, r.ToolCalls[1].Name})
	require.Contains(t, lastReply(t, conv), "goodbye from the demo")

	// A change, then a terminal failure: the run fails and asks what to do with the change.
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100, "maxRetries": 1})
	s, _ = c.send(t, conv, "write draft.md: a first draft then fail terminal", nil)
	r = c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "FAILED", r.Status)
	require.NotContains(t, *r.Error, "TERMINAL")
	require.Contains(t, *r.Error, "fail terminal")
	ap := c.rollbackApproval(t, s.RunID)
	code, _ := c.resolveRollback(t, c.s.AccessToken, ap, "ROLLBACK")
	require.Empty(t, code)
	require.Empty(t, file(t, "draft.md"), "rolled back")

	// A transient failure is retried (maxRetries 1: two attempts), then the run fails.
	s, _ = c.send(t, conv, "fail transient", nil)
	r = c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "FAILED", r.Status)
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "task.retrying"), "%v %s %+v", eventTypes(evs), *r.Error, evs)
	require.Equal(t, 2, countType(evs, "execution.started"))
	// ...and "once" fails only the first attempt: the retry completes.
	s, _ = c.send(t, conv, "fail transient once then list files", nil)
	r = c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	evs = c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "task.retrying"), "%v %s", eventTypes(evs), lastReply(t, conv))
	require.Contains(t, lastReply(t, conv), "notes.md")

	// A slow answer streams long enough to be cancelled midway.
	s, _ = c.send(t, conv, "stream slowly", nil)
	sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	for {
		ev, ok := sub.Next(20 * time.Second)
		require.True(t, ok)
		if ev.Type == "message.delta" {
			break
		}
	}
	res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "CANCELLED", c.waitRun(t, s.RunID, 20*time.Second).Status)

	// help lists the commands.
	s, _ = c.send(t, conv, "help", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 30*time.Second).Status)
	reply := lastReply(t, conv)
	for _, cmd := range []string{"write PATH: TEXT", "fail transient|recoverable|terminal", "stream slowly"} {
		require.True(t, strings.Contains(reply, cmd), "help does not mention %q: %s", cmd, reply)
	}
}
