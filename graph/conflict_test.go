package graph_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// TestControlsOfAnEndedRunAreConflict: pausing, resuming, stopping or cancelling a run that has
// ended answers CONFLICT naming its status, and changes nothing.
func TestControlsOfAnEndedRunAreConflict(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("done")) })
	s, _ := c.send(t, c.conversation(t, nil), "hi", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 20*time.Second).Status)
	before, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	for _, op := range []string{"cancelRun", "pauseRun", "resumeRun", "stopRun"} {
		res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { `+op+`(id: $id) { status } }`, map[string]any{"id": s.RunID})
		require.Equal(t, "CONFLICT", res.Code(), "%s: %s", op, res.Body)
		require.Equal(t, "run already COMPLETED", res.Errors[0].Message, op)
		require.Equal(t, "COMPLETED", res.Errors[0].Extensions["runStatus"], op)
	}
	after, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Equal(t, "COMPLETED", c.run(t, s.RunID).Status)
}

// TestIdempotencyKeyWithOtherContentIsConflict: the same idempotency key gives the same run for
// the same message, and CONFLICT (naming that run) for another one, which is not stored.
func TestIdempotencyKeyWithOtherContentIsConflict(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	c := &chatEnv{Env: env, s: env.SignUp(t, "", "")}
	conv := c.conversation(t, nil)
	key := map[string]any{"idempotencyKey": "k-1"}
	first, _ := c.send(t, conv, "the first message", key)
	again, _ := c.send(t, conv, "the first message", key)
	require.Equal(t, first, again)
	_, res := c.send(t, conv, "another message", key)
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
	require.Contains(t, res.Errors[0].Message, "idempotencyKey")
	require.Equal(t, first.RunID, res.Errors[0].Extensions["runId"])
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages`))
	// Another key is another message.
	other, _ := c.send(t, conv, "another message", map[string]any{"idempotencyKey": "k-2"})
	require.NotEqual(t, first.RunID, other.RunID)
}

// TestRunErrorsSayWhatToDo: a failed run's error reads as the provider said it, without the
// failure class (that is failureClass), and resolveApproval on the rollback question it asks
// names resolveRollback.
func TestRunErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	q.push(wsWrite("w1", "notes.md", "a change\n"), llmtest.Error(401, "invalid x-api-key"))
	s, _ := c.send(t, c.conversation(t, nil), "write and fail", nil)
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "FAILED", r.Status)
	var failed struct {
		Run struct{ FailureClass, Error string }
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { failureClass error } }`, map[string]any{"id": s.RunID}).Decode(t, &failed)
	require.Equal(t, "TERMINAL", failed.Run.FailureClass)
	require.Contains(t, failed.Run.Error, "anthropic 401")
	require.Contains(t, failed.Run.Error, "invalid x-api-key")
	for _, class := range []string{"TERMINAL", "TRANSIENT", "RECOVERABLE"} {
		require.NotContains(t, failed.Run.Error, class)
	}

	ap := c.rollbackApproval(t, s.RunID)
	res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { resolveApproval(id: $id, decision: APPROVE) { status } }`, map[string]any{"id": ap})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	require.Contains(t, res.Errors[0].Message, "resolveRollback")
	require.Equal(t, ap, c.rollbackApproval(t, s.RunID), "the question is still open")
	code, _ := c.resolveRollback(t, c.s.AccessToken, ap, "KEEP")
	require.Empty(t, code)
}

// TestDemoModelsOnly: a conversation may name the demo's model, never another "demo:" one.
func TestDemoModelsOnly(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	const create = `mutation($m: String) { createConversation(input: {model: $m}) { model } }`
	res := env.Do(t, s.AccessToken, create, map[string]any{"m": "demo:gpt-5"})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	require.True(t, strings.Contains(res.Errors[0].Message, "demo:demo"), "%s", res.Body)
	var ok struct{ CreateConversation struct{ Model string } }
	env.Do(t, s.AccessToken, create, map[string]any{"m": "demo:demo"}).Decode(t, &ok)
	require.Equal(t, "demo:demo", ok.CreateConversation.Model)
}
