package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/tool"
)

// script answers requests with a function of how many came before and the request.
type script struct {
	mu   sync.Mutex
	n    int
	reqs []llmtest.Request
	at   []time.Time
}

func (s *script) install(srv *llmtest.Server, f func(n int, req llmtest.Request) llmtest.Reply) {
	srv.SetResponder(func(req llmtest.Request) llmtest.Reply {
		s.mu.Lock()
		n := s.n
		s.n++
		s.reqs = append(s.reqs, req)
		s.at = append(s.at, time.Now())
		s.mu.Unlock()
		return f(n, req)
	})
}

func (s *script) requests() []llmtest.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llmtest.Request(nil), s.reqs...)
}

func (s *script) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

func hasTools(req llmtest.Request) bool {
	tools, ok := req.Body["tools"].([]any)
	return ok && len(tools) > 0
}

func (c *chatEnv) eventsOf(t *testing.T, runID string) []apptest.Event {
	t.Helper()
	evs, err := c.runEvents(t, runID, 0)
	require.NoError(t, err)
	return evs
}

func countType(evs []apptest.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func (c *chatEnv) settings(t testing.TB, in map[string]any) {
	t.Helper()
	res := c.Do(t, c.s.AccessToken, `mutation($in: AgentSettingsInput!) { updateAgentSettings(input: $in) { maxRetries } }`, map[string]any{"in": in})
	require.Empty(t, res.Errors, "%s", res.Body)
}

func TestClassifierContinue(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		switch n {
		case 0:
			return llmtest.Stream(llmtest.ToolCall("c1", "read_file", `{"path":"missing.txt"}`))
		case 1:
			return llmtest.Stream(llmtest.ToolCall("c2", "write_file", `{"path":"missing.txt","content":"now it exists"}`))
		default:
			return llmtest.Stream(llmtest.Text("fixed"))
		}
	})
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	s, _ := c.send(t, c.conversation(t, nil), "read missing.txt", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "tool.failed"))
	require.Zero(t, countType(evs, "execution.backtracked"))
	// The failure went back to the model as a tool result.
	require.Contains(t, string(sc.requests()[1].Raw), "missing.txt")
	require.Contains(t, string(sc.requests()[1].Raw), `"is_error":true`)
}

func TestClassifierBacktrackRewritesContext(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		if n < 2 {
			return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("bad_%d", n), "read_file", `{"path":"nope/missing.txt"}`))
		}
		return llmtest.Stream(llmtest.Text("gave up on that file"))
	})
	s, _ := c.send(t, c.conversation(t, nil), "read nope/missing.txt", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	reqs := sc.requests()
	require.Len(t, reqs, 3)
	// The second request still carries the first failure (CONTINUE); after the repeat, the
	// third no longer holds either failed call but holds the reflection summary.
	require.Contains(t, string(reqs[1].Raw), "bad_0")
	third := string(reqs[2].Raw)
	require.NotContains(t, third, "bad_0")
	require.NotContains(t, third, "bad_1")
	require.Contains(t, third, "Reflection (agentry)")
	require.Contains(t, third, "nope/missing.txt")
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "execution.backtracked"))
}

func TestBreakerReflectionTurnThenFailGracefully(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "openai")
	var sc script
	sc.install(c.llm, func(n int, req llmtest.Request) llmtest.Reply {
		if !hasTools(req) {
			return llmtest.Stream(llmtest.Text("reflecting / summarising without tools"))
		}
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("f%d", n), "read_file", fmt.Sprintf(`{"path":"missing-%d.txt"}`, n)))
	})
	s, _ := c.send(t, c.conversation(t, nil), "try reading things", nil)
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "FAILED", r.Status)
	require.Equal(t, "consecutive_failures", *r.TerminationReason)
	reqs := sc.requests()
	// Calls: 3 failing tool calls, a reflection turn without tools, 2 more failures, then the
	// summary without tools.
	var shape []bool
	for _, q := range reqs {
		shape = append(shape, hasTools(q))
	}
	require.Equal(t, []bool{true, true, true, false, true, true, false}, shape)
	require.Contains(t, string(reqs[3].Raw), "Before calling any tool again")
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "execution.reflected"))
	require.Equal(t, 5, countType(evs, "tool.failed"))
}

func TestBreakerFifthBacktrackOpensCircuit(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("same_%d", n), "read_file", `{"path":"always/missing.txt"}`))
	})
	s, _ := c.send(t, c.conversation(t, nil), "keep trying", nil)
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "FAILED", r.Status)
	require.Equal(t, "circuit_open", *r.TerminationReason, deref(r.Error))
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 5, countType(evs, "execution.backtracked"))
	require.Equal(t, 6, len(sc.requests()))
}

// permissionTool fails the way a tool that needs a person does.
type permissionTool struct{}

func (permissionTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "deploy", Description: "Deploys the project.", Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
}
func (permissionTool) Risk(json.RawMessage) int { return 0 }
func (permissionTool) ReadOnly() bool           { return true }
func (permissionTool) Run(context.Context, tool.Env, json.RawMessage) (tool.Result, error) {
	return tool.Result{}, errors.New("permission denied: production deploys require a human")
}

func TestClassifierEscalates(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	require.NoError(t, c.App.Tools.Register(permissionTool{}))
	c.llm.SetDefault(llmtest.Stream(llmtest.ToolCall("d1", "deploy", `{}`)))
	s, _ := c.send(t, c.conversation(t, nil), "deploy it", nil)
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "AWAITING_APPROVAL" }, 15*time.Second, 20*time.Millisecond)
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "approval.requested"))
	var req struct{ Kind, Question string }
	for _, e := range evs {
		if e.Type == "approval.requested" {
			require.NoError(t, json.Unmarshal(e.Data, &req))
		}
	}
	require.Equal(t, "escalation", req.Kind)
	require.Contains(t, req.Question, "permission denied")
	// No worker holds it.
	require.Eventually(t, func() bool {
		return len(c.Jobs(t, "run", rivertype.JobStateRunning)) == 0
	}, 5*time.Second, 20*time.Millisecond)
}

func TestTerminatorBudget(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"maxTokensPerTask": 1024, "autoExecute": true, "approvalThreshold": 100})
	c.llm.SetDefault(llmtest.Stream(llmtest.ToolCall("l", "list_files", `{}`), llmtest.Usage(100, 1500, 0)))
	s, _ := c.send(t, c.conversation(t, nil), "spend", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "FAILED", r.Status)
	require.Equal(t, "budget_exceeded", *r.TerminationReason)
	require.Equal(t, 1, c.llm.Calls())
}

func TestTerminatorUserIntent(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	var sc script
	sc.install(c.llm, func(n int, req llmtest.Request) llmtest.Reply {
		if n == 0 {
			<-gate
			return llmtest.Stream(llmtest.ToolCall("l1", "list_files", `{}`))
		}
		return llmtest.Stream(llmtest.Text("ok"))
	})
	conv := c.conversation(t, nil)
	first, _ := c.send(t, conv, "start a long job", nil)
	require.Eventually(t, func() bool { return len(sc.requests()) == 1 }, 10*time.Second, 10*time.Millisecond)
	c.send(t, conv, "please stop", nil)
	open()
	r := c.waitRun(t, first.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Equal(t, "user_intent", *r.TerminationReason)
}

func TestStopRunSummarises(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	var sc script
	sc.install(c.llm, func(n int, req llmtest.Request) llmtest.Reply {
		if !hasTools(req) {
			return llmtest.Stream(llmtest.Text("Summary: listed files once."))
		}
		if n == 0 {
			<-gate
		}
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("l%d", n), "list_files", `{}`))
	})
	c.settings(t, map[string]any{"autoExecute": true})
	s, _ := c.send(t, c.conversation(t, nil), "work", nil)
	require.Eventually(t, func() bool { return len(sc.requests()) == 1 }, 10*time.Second, 10*time.Millisecond)
	var out struct{ StopRun struct{ Status string } }
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { stopRun(id: $id) { status } }`, map[string]any{"id": s.RunID}).Decode(t, &out)
	open()
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Equal(t, "user_stop", *r.TerminationReason)
	reqs := sc.requests()
	require.False(t, hasTools(reqs[len(reqs)-1]), "the last call is the summary, without tools")
	require.Len(t, r.ToolCalls, 1, "the current step finished, no new one started")
}

func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	var sc script
	sc.install(c.llm, func(n int, req llmtest.Request) llmtest.Reply {
		if n == 0 {
			<-gate
			return llmtest.Stream(llmtest.ToolCall("l1", "list_files", `{}`))
		}
		return llmtest.Stream(llmtest.Text("done after resume"))
	})
	c.settings(t, map[string]any{"autoExecute": true})
	s, _ := c.send(t, c.conversation(t, nil), "work", nil)
	require.Eventually(t, func() bool { return len(sc.requests()) == 1 }, 10*time.Second, 10*time.Millisecond)
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { pauseRun(id: $id) { status } }`, map[string]any{"id": s.RunID})
	open()
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "PAUSED" }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, len(sc.requests()), "a paused run makes no model call")
	require.Eventually(t, func() bool {
		return len(c.Jobs(t, "run", rivertype.JobStateRunning)) == 0
	}, 5*time.Second, 20*time.Millisecond, "a paused run holds no worker")
	res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { resumeRun(id: $id) { status } }`, map[string]any{"id": s.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "execution.paused"))
	require.Equal(t, 1, countType(evs, "execution.resumed"))
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		if n == 0 {
			return llmtest.Error(429, "slow down").WithHeader("Retry-After", "2")
		}
		return llmtest.Stream(llmtest.Text("ok now"))
	})
	s, _ := c.send(t, c.conversation(t, nil), "hi", nil)
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	at := sc.times()
	require.Len(t, at, 2)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 2*time.Second, "retried before Retry-After")
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "task.retrying"))
	for _, e := range evs {
		if e.Type == "task.retrying" {
			var d struct{ FailureClass, Error string }
			require.NoError(t, json.Unmarshal(e.Data, &d))
			require.Equal(t, "TRANSIENT", d.FailureClass)
		}
	}
}

func TestRetryBackoffOn500(t *testing.T) {
	t.Parallel()
	c := newChatEnvWith(t, "openai", map[string]string{"AGENTRY_RETRY_BASE_DELAY": "300ms"})
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		if n < 2 {
			return llmtest.Error(500, "boom")
		}
		return llmtest.Stream(llmtest.Text("recovered"))
	})
	s, _ := c.send(t, c.conversation(t, nil), "hi", nil)
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	at := sc.times()
	require.Len(t, at, 3)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 300*time.Millisecond)
	require.GreaterOrEqual(t, at[2].Sub(at[1]), 600*time.Millisecond, "the second retry waits twice the base")
}

func TestUnauthorisedFailsAtOnce(t *testing.T) {
	t.Parallel()
	onPaths(t, unauthorisedFailsAtOnce)
}

// unauthorisedFailsAtOnce is TestUnauthorisedFailsAtOnce in a process with configuration env:
// through River the job ends cancelled; worked where it was sent, no job is made for it.
func unauthorisedFailsAtOnce(t *testing.T, env map[string]string) {
	c := newChatEnvWith(t, "anthropic", env)
	c.llm.SetDefault(llmtest.Error(401, "invalid x-api-key"))
	s, _ := c.send(t, c.conversation(t, nil), "hi", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "FAILED", r.Status)
	var out struct {
		Run struct{ FailureClass *string }
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { failureClass } }`, map[string]any{"id": s.RunID}).Decode(t, &out)
	require.Equal(t, "TERMINAL", *out.Run.FailureClass)
	if env == nil {
		require.Empty(t, c.Jobs(t, "run"), "nothing handed to River")
	} else {
		// River records the job's end after the worker returns, in batches.
		require.Eventually(t, func() bool {
			return len(c.Jobs(t, "run", rivertype.JobStateCancelled)) == 1
		}, 5*time.Second, 20*time.Millisecond, "the job ends cancelled: River does not retry it")
	}
	require.Equal(t, 1, c.llm.Calls(), "a terminal failure is not retried")
}

func TestRecoverableErrorReachesNextPrompt(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		if n == 0 {
			return llmtest.Error(400, "prompt is too long: 250000 tokens > 200000 maximum")
		}
		return llmtest.Stream(llmtest.Text("shorter now"))
	})
	s, _ := c.send(t, c.conversation(t, nil), "hi", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	reqs := sc.requests()
	require.Len(t, reqs, 2)
	require.NotContains(t, fmt.Sprint(reqs[0].Body["system"]), "previous attempt")
	require.Contains(t, fmt.Sprint(reqs[1].Body["system"]), "prompt is too long")
}

func TestMaxRetriesBoundsAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ retries, attempts int }{{0, 1}, {10, 11}} {
		t.Run(fmt.Sprint(tc.retries), func(t *testing.T) {
			t.Parallel()
			c := newChatEnvWith(t, "anthropic", map[string]string{"AGENTRY_RETRY_BASE_DELAY": "1ms"})
			c.settings(t, map[string]any{"maxRetries": tc.retries})
			c.llm.SetDefault(llmtest.Error(503, "overloaded"))
			s, _ := c.send(t, c.conversation(t, nil), "hi", nil)
			r := c.waitRun(t, s.RunID, 60*time.Second)
			require.Equal(t, "FAILED", r.Status)
			require.Equal(t, "retries_exhausted", *r.TerminationReason)
			require.Equal(t, tc.attempts, c.llm.Calls())
		})
	}
}

var _ = strings.Contains

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
