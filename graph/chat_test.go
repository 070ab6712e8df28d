package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// chatEnv is agentry wired to a test LLM server of one provider.
type chatEnv struct {
	*apptest.Env
	llm   *llmtest.Server
	model string
	s     apptest.Session
}

func newChatEnv(t *testing.T, provider string) *chatEnv {
	t.Helper()
	return newChatEnvWith(t, provider, nil)
}

// newChatEnvWith is newChatEnv with extra configuration.
func newChatEnvWith(t *testing.T, provider string, extra map[string]string) *chatEnv {
	t.Helper()
	var srv *llmtest.Server
	env := map[string]string{}
	for k, v := range extra {
		env[k] = v
	}
	model := ""
	switch provider {
	case "anthropic":
		srv = llmtest.NewAnthropicServer(t)
		env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"] = "test-key", srv.BaseURL()
		model = "anthropic:claude-sonnet-4-5"
	case "openai":
		srv = llmtest.NewOpenAIServer(t)
		env["OPENAI_API_KEY"], env["OPENAI_BASE_URL"] = "test-key", srv.BaseURL()
		model = "openai:gpt-4o-mini"
	default:
		t.Fatalf("provider %s", provider)
	}
	e := apptest.Start(t, apptest.Options{Env: env})
	return &chatEnv{Env: e, llm: srv, model: model, s: e.SignUp(t, "", "")}
}

func (c *chatEnv) conversation(t testing.TB, extra map[string]any) string {
	t.Helper()
	in := map[string]any{"model": c.model, "title": "test"}
	for k, v := range extra {
		in[k] = v
	}
	var out struct{ CreateConversation struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation($in: CreateConversationInput!) { createConversation(input: $in) { id } }`, map[string]any{"in": in}).Decode(t, &out)
	return out.CreateConversation.ID
}

type sent struct {
	MessageID, RunID, Status string
}

func (c *chatEnv) send(t testing.TB, conv, content string, extra map[string]any) (sent, *apptest.Response) {
	t.Helper()
	in := map[string]any{"conversationId": conv, "content": content}
	for k, v := range extra {
		in[k] = v
	}
	res := c.Do(t, c.s.AccessToken, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { message { id } run { id status } } }`, map[string]any{"in": in})
	if len(res.Errors) > 0 {
		return sent{}, res
	}
	var out struct {
		SendMessage struct {
			Message struct{ ID string }
			Run     struct{ ID, Status string }
		}
	}
	res.Decode(t, &out)
	return sent{MessageID: out.SendMessage.Message.ID, RunID: out.SendMessage.Run.ID, Status: out.SendMessage.Run.Status}, res
}

type runView struct {
	ID, Status        string
	TerminationReason *string
	Error             *string
	Turns             int
	InputTokens       int64
	OutputTokens      int64
	ToolCalls         []struct {
		Name, Status string
		Output       *string
		Error        *string
	}
}

func (c *chatEnv) run(t *testing.T, id string) runView {
	t.Helper()
	var out struct{ Run runView }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { id status terminationReason error turns inputTokens outputTokens toolCalls { name status output error } } }`,
		map[string]any{"id": id}).Decode(t, &out)
	return out.Run
}

// waitRun polls until the run is terminal.
func (c *chatEnv) waitRun(t *testing.T, id string, timeout time.Duration) runView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := c.run(t, id)
		switch r.Status {
		case "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT":
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after %s", id, r.Status, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// systemConn is a connection of the owner's that sees every tenant's rows (the owner is
// subject to the forced row-level security too); it closes when the test ends.
func systemConn(t testing.TB, ownerURL string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `SELECT set_config('app.system', 'on', false)`)
	require.NoError(t, err)
	return conn
}

func (c *chatEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// The owner is subject to row-level security too: look across tenants explicitly.
	tx, err := conn.Begin(context.Background())
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(context.Background(), `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func eventTypes(evs []apptest.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func TestChatStreamedReply(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			c := newChatEnv(t, provider)
			c.llm.Enqueue(llmtest.Stream(llmtest.Text("Hello there, how can I help you today?"), llmtest.Usage(120, 9, 0)))
			conv := c.conversation(t, nil)
			s, _ := c.send(t, conv, "hi", nil)
			require.Equal(t, "RUNNING", s.Status, "the process that took the turn acquired it with its message")

			sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
			evs := sub.Collect(15*time.Second, nil)
			durable := apptest.Durable(t, evs, 0)
			types := eventTypes(durable)
			require.Equal(t, "task.queued", types[0])
			require.Contains(t, types, "execution.started")
			require.Contains(t, types, "message.completed")
			require.Contains(t, types, "usage.recorded")
			require.Equal(t, "execution.completed", types[len(types)-1])

			var text strings.Builder
			for _, e := range evs {
				if e.Type == "message.delta" {
					var d struct{ Text string }
					require.NoError(t, json.Unmarshal(e.Data, &d))
					text.WriteString(d.Text)
				}
			}
			// Deltas may have streamed before the subscription attached; what arrived is a prefix.
			require.True(t, strings.HasSuffix("Hello there, how can I help you today?", text.String()) || text.Len() == 0 ||
				strings.HasPrefix("Hello there, how can I help you today?", text.String()), "deltas %q", text.String())

			r := c.run(t, s.RunID)
			require.Equal(t, "COMPLETED", r.Status)
			require.Equal(t, int64(120), r.InputTokens)
			require.Equal(t, int64(9), r.OutputTokens)

			var conv2 struct {
				Conversation struct {
					Messages struct {
						Edges []struct {
							Node struct{ Role, Content string }
						}
					}
				}
			}
			c.Do(t, c.s.AccessToken, `query($id: ID!) { conversation(id: $id) { messages { edges { node { role content } } } } }`, map[string]any{"id": conv}).Decode(t, &conv2)
			msgs := conv2.Conversation.Messages.Edges
			require.Len(t, msgs, 2)
			require.Equal(t, "USER", msgs[0].Node.Role)
			require.Equal(t, "ASSISTANT", msgs[1].Node.Role)
			require.Equal(t, "Hello there, how can I help you today?", msgs[1].Node.Content)
			require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records`))
			require.Equal(t, 1, c.llm.Calls())
		})
	}
}

func TestChatToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			c := newChatEnv(t, provider)
			c.llm.Enqueue(
				llmtest.Stream(llmtest.Text("Writing it."), llmtest.ToolCall("call_1", "write_file", `{"path":"notes/todo.md","content":"buy milk\n"}`)),
				llmtest.Stream(llmtest.Text("Done: notes/todo.md is written.")),
			)
			// Writing needs no person in this test.
			c.Do(t, c.s.AccessToken, `mutation { updateAgentSettings(input: {autoExecute: true}) { autoExecute } }`, nil).Decode(t, &struct{}{})
			conv := c.conversation(t, nil)
			s, _ := c.send(t, conv, "write my todo", nil)
			r := c.waitRun(t, s.RunID, 15*time.Second)
			require.Equal(t, "COMPLETED", r.Status, "error: %v", r.Error)
			require.Len(t, r.ToolCalls, 1)
			require.Equal(t, "write_file", r.ToolCalls[0].Name)
			require.Equal(t, "COMPLETED", r.ToolCalls[0].Status)

			// The second request carries the tool's result.
			reqs := c.llm.Requests()
			require.Len(t, reqs, 2)
			raw := string(reqs[1].Raw)
			require.Contains(t, raw, "call_1")
			switch provider {
			case "anthropic":
				require.Contains(t, raw, `"tool_result"`)
			case "openai":
				require.Contains(t, raw, `"role":"tool"`)
			}
			// Tools were offered.
			require.Contains(t, string(reqs[0].Raw), "write_file")
			// The effect is in the workspace, committed with the call.
			require.Equal(t, 1, c.count(t, `SELECT count(*) FROM workspace_files WHERE path = 'notes/todo.md' AND content = 'buy milk'||chr(10)`))
			require.Equal(t, 2, c.count(t, `SELECT count(*) FROM usage_records`))

			evs, err := c.runEvents(t, s.RunID, 0)
			require.NoError(t, err)
			types := eventTypes(evs)
			require.Contains(t, types, "tool.started")
			require.Contains(t, types, "tool.completed")
		})
	}
}

// runEvents reads run.events through the query API.
func (c *chatEnv) runEvents(t *testing.T, runID string, after int) ([]apptest.Event, error) {
	t.Helper()
	var out struct {
		Run struct{ Events []apptest.Event }
	}
	res := c.Do(t, c.s.AccessToken, `query($id: ID!, $after: Int) { run(id: $id) { events(afterSeq: $after) { seq runId type data } } }`, map[string]any{"id": runID, "after": after})
	if len(res.Errors) > 0 {
		return nil, fmt.Errorf("%s", res.Body)
	}
	res.Decode(t, &out)
	return out.Run.Events, nil
}

func TestChatToolsForeverStopsAtMaxTurns(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			c := newChatEnv(t, provider)
			var mu sync.Mutex
			n := 0
			c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
				mu.Lock()
				defer mu.Unlock()
				n++
				return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("call_%d", n), "list_files", `{}`))
			})
			conv := c.conversation(t, nil)
			s, _ := c.send(t, conv, "loop forever", nil)
			r := c.waitRun(t, s.RunID, 20*time.Second)
			require.Equal(t, "COMPLETED", r.Status)
			require.NotNil(t, r.TerminationReason)
			require.Equal(t, "max_turns", *r.TerminationReason)
			require.Equal(t, 10, c.llm.Calls())
			require.Equal(t, 10, c.count(t, `SELECT count(*) FROM usage_records`))
			require.Len(t, r.ToolCalls, 10)
			for _, tc := range r.ToolCalls {
				require.Equal(t, "COMPLETED", tc.Status)
			}
		})
	}
}

func TestChatNonAgenticGetsNoTools(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.Enqueue(llmtest.Stream(llmtest.Text("plain answer")))
	conv := c.conversation(t, map[string]any{"agentic": false})
	s, _ := c.send(t, conv, "hi", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 10*time.Second).Status)
	_, hasTools := c.llm.LastRequest(t).Body["tools"]
	require.False(t, hasTools, "a non-agentic conversation was offered tools")
}

func TestSendMessageIdempotency(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("ok")))
	conv := c.conversation(t, nil)
	a, _ := c.send(t, conv, "once", map[string]any{"idempotencyKey": "k-1"})
	b, _ := c.send(t, conv, "once", map[string]any{"idempotencyKey": "k-1"})
	require.Equal(t, a.MessageID, b.MessageID)
	require.Equal(t, a.RunID, b.RunID)
	c.waitRun(t, a.RunID, 10*time.Second)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs`))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages WHERE role = 'USER'`))
	require.Empty(t, c.Jobs(t, "run"), "worked where it was sent, once: no job")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM run_events WHERE type = 'execution.started'`))
	require.Equal(t, 1, c.llm.Calls())
}

func TestSendMessageBusyPolicies(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	var mu sync.Mutex
	var order []string
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		msgs := req.Messages()
		last := fmt.Sprint(msgs[len(msgs)-1]["content"])
		mu.Lock()
		order = append(order, last)
		mu.Unlock()
		if strings.Contains(last, "slow") {
			<-release
		}
		return llmtest.Stream(llmtest.Text("answer"))
	})
	conv := c.conversation(t, nil)
	first, _ := c.send(t, conv, "slow one", nil)
	// Wait until the first run is working.
	require.Eventually(t, func() bool { return c.llm.Calls() == 1 }, 10*time.Second, 10*time.Millisecond)

	// REJECT: CONFLICT, nothing stored.
	_, res := c.send(t, conv, "rejected", map[string]any{"ifBusy": "REJECT"})
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
	require.Equal(t, 0, c.count(t, `SELECT count(*) FROM messages WHERE content = 'rejected'`))

	// ENQUEUE (default): queued behind, in order.
	second, _ := c.send(t, conv, "second", nil)
	third, _ := c.send(t, conv, "third", map[string]any{"ifBusy": "ENQUEUE"})
	for _, queued := range []sent{second, third} {
		require.Equal(t, "QUEUED", c.run(t, queued.RunID).Status)
		require.Nil(t, c.JobOfRun(t, approvalUUID(t, "Run", queued.RunID)), "no job: no worker can start it before its turn")
	}
	releaseOnce()
	require.Equal(t, "COMPLETED", c.waitRun(t, first.RunID, 10*time.Second).Status)
	require.Equal(t, "COMPLETED", c.waitRun(t, second.RunID, 10*time.Second).Status)
	require.Equal(t, "COMPLETED", c.waitRun(t, third.RunID, 10*time.Second).Status)
	mu.Lock()
	require.Len(t, order, 3)
	require.Contains(t, order[1], "second")
	require.Contains(t, order[2], "third")
	mu.Unlock()
}

func TestSendMessageInterrupt(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		if strings.Contains(string(req.Raw), "long task") && !strings.Contains(string(req.Raw), "new question") {
			return llmtest.Stream(llmtest.Text("working"), llmtest.Delay(30*time.Second), llmtest.Text("never"))
		}
		return llmtest.Stream(llmtest.Text("quick answer"))
	})
	conv := c.conversation(t, nil)
	first, _ := c.send(t, conv, "long task", nil)
	require.Eventually(t, func() bool { return c.llm.Calls() == 1 }, 10*time.Second, 10*time.Millisecond)
	second, res := c.send(t, conv, "new question", map[string]any{"ifBusy": "INTERRUPT"})
	require.Empty(t, res.Errors)
	r1 := c.waitRun(t, first.RunID, 10*time.Second)
	require.Equal(t, "CANCELLED", r1.Status)
	require.Equal(t, "COMPLETED", c.waitRun(t, second.RunID, 10*time.Second).Status)
	require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the interrupted run's model stream was not closed")
}

// TestCancelBeforeOutputIsMetered: a run cancelled while its model call has sent nothing yet
// (OpenAI's stream is open; its usage would come at its end) ends CANCELLED, and the call is
// metered with its request's estimated input and no output: the provider had the request.
func TestCancelBeforeOutputIsMetered(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "openai")
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	c.llm.Enqueue(llmtest.Stream(llmtest.Wait(gate), llmtest.Text("never sent")))
	s, _ := c.send(t, c.conversation(t, nil), "go", nil)
	require.Eventually(t, func() bool { return c.llm.Calls() == 1 }, 10*time.Second, 10*time.Millisecond)
	res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the model stream was not closed")
	require.Equal(t, "CANCELLED", c.waitRun(t, s.RunID, 5*time.Second).Status)
	runID := approvalUUID(t, "Run", s.RunID)
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1`, runID) == 1
	}, 5*time.Second, 10*time.Millisecond, "the cut call was not metered")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1 AND input_tokens > 0 AND output_tokens = 0`, runID))
	require.Zero(t, c.count(t, `SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'ASSISTANT'`, runID))
}

func TestCancelStreamingRun(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "openai")
	// The model streams its first words only once the subscription is listening (gate), then
	// hangs: token deltas are ephemeral, so a delta sent before the subscription reached the
	// hub would reach it only as the message.snapshot of a late subscriber.
	gate := make(chan struct{})
	c.llm.Enqueue(llmtest.Stream(llmtest.Wait(gate), llmtest.Text("first words"), llmtest.Delay(30*time.Second), llmtest.Text("never sent")))
	conv := c.conversation(t, nil)
	s, _ := c.send(t, conv, "go", nil)
	sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	// The first replayed event means the subscription is registered (it subscribes, then
	// replays): release the model, and wait for its first token.
	ev, ok := sub.Next(10 * time.Second)
	require.True(t, ok)
	require.NotEqual(t, "message.delta", ev.Type)
	close(gate)
	for ev.Type != "message.delta" {
		ev, ok = sub.Next(10 * time.Second)
		require.True(t, ok)
	}
	start := time.Now()
	var out struct{ CancelRun struct{ Status string } }
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID}).Decode(t, &out)
	require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the model stream was not closed")
	r := c.waitRun(t, s.RunID, 5*time.Second)
	t.Logf("cancel took %s", time.Since(start))
	require.Equal(t, "CANCELLED", r.Status)
	for _, tc := range r.ToolCalls {
		require.NotEqual(t, "PENDING", tc.Status)
		require.NotEqual(t, "RUNNING", tc.Status)
	}
	evs := sub.Collect(5*time.Second, nil)
	require.Equal(t, "execution.cancelled", evs[len(evs)-1].Type)
	// The call the cancel cut is metered (a cancel does not make a call free), with tokens both
	// ways although OpenAI's stream reports its usage only at its end, which this one never
	// reached; its partial reply, which the user saw stream, is kept.
	runID := approvalUUID(t, "Run", s.RunID)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1`, runID))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1 AND input_tokens > 0 AND output_tokens > 0 AND cost_micros > 0`, runID),
		"the cut call was metered as free")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'ASSISTANT' AND content = 'first words'`, runID))
	// The conversation is free again: the next message runs.
	c.llm.Enqueue(llmtest.Stream(llmtest.Text("after the cancel")))
	next, _ := c.send(t, conv, "again", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, next.RunID, 10*time.Second).Status)
}
