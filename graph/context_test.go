package graph_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/extract/extracttest"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// The context window tests run against the Anthropic test server with claude-sonnet-4-5 given
// a small context (cwContext tokens: a history budget of about 8,000 tokens); summaries go to
// the default summary model of the provider, claude-haiku-4-5, which the server answers with a
// numbered summary.
const (
	cwContext      = 28_000
	cwSummaryModel = "claude-haiku-4-5"
)

// cwEnv is a chat env with the small context and a server that counts summarisation calls.
type cwEnv struct {
	*chatEnv
	mu        sync.Mutex
	summaries []llmtest.Request
	mains     []llmtest.Request
	// main answers model calls (nil: "ok"); summary answers summarisation calls (nil: a
	// numbered summary).
	main, summary func(n int, req llmtest.Request) llmtest.Reply
}

func newCWEnv(t *testing.T, extra map[string]string) *cwEnv {
	t.Helper()
	c := &cwEnv{chatEnv: newChatEnvWith(t, "anthropic", extra)}
	c.App.Context.SetContextTokens(c.model, cwContext)
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		c.mu.Lock()
		if req.Model() == cwSummaryModel {
			c.summaries = append(c.summaries, req)
			n, f := len(c.summaries), c.summary
			c.mu.Unlock()
			if f != nil {
				return f(n, req)
			}
			return llmtest.Stream(llmtest.Text(fmt.Sprintf("SUMMARY-%d: the user asked numbered questions and got answers.", n)), llmtest.Usage(900, 30, 0))
		}
		c.mains = append(c.mains, req)
		n, f := len(c.mains), c.main
		c.mu.Unlock()
		if f != nil {
			return f(n, req)
		}
		return llmtest.Stream(llmtest.Text("ok"))
	})
	return c
}

func (c *cwEnv) counts() (mains, summaries []llmtest.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]llmtest.Request(nil), c.mains...), append([]llmtest.Request(nil), c.summaries...)
}

// cwExec runs SQL as the owner, across tenants.
func cwExec(t *testing.T, ownerURL, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, sql, args...)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

// cwSeed appends n stored messages to a conversation (as if earlier turns had happened): user
// and assistant turns of about 100 tokens each, every fifth turn with a tool call and its
// result. It returns their texts in order.
func (c *cwEnv) seed(t *testing.T, conv string, n int) []string {
	t.Helper()
	_, convID := isoDecodeID(t, conv)
	var texts []string
	var rows [][]any
	add := func(role string, blocks ...llm.Block) {
		parts, err := json.Marshal(blocks)
		require.NoError(t, err)
		txt := llm.Message{Blocks: blocks}.Text()
		if role == "TOOL" {
			txt = blocks[0].Content
		}
		texts = append(texts, txt)
		rows = append(rows, []any{role, txt, parts})
	}
	for i := 0; len(rows) < n; i++ {
		body := strings.Repeat(fmt.Sprintf("w%03d ", i), 80)[:380]
		add("USER", llm.Block{Type: llm.BlockText, Text: fmt.Sprintf("question %03d %s", i, body)})
		if i%5 == 4 {
			id := fmt.Sprintf("seed_call_%d", i)
			add("ASSISTANT", llm.Block{Type: llm.BlockText, Text: "checking"}, llm.Block{Type: llm.BlockToolUse, ID: id, Name: "list_files", Input: json.RawMessage(`{}`)})
			add("TOOL", llm.Block{Type: llm.BlockToolResult, ToolUseID: id, Content: fmt.Sprintf("listing %03d %s", i, body)})
		}
		add("ASSISTANT", llm.Block{Type: llm.BlockText, Text: fmt.Sprintf("answer %03d %s", i, body)})
	}
	texts, rows = texts[:n], rows[:n]
	ctx := context.Background()
	tx, err := systemConn(t, c.OwnerURL).Begin(ctx)
	require.NoError(t, err)
	for _, r := range rows {
		_, err := tx.Exec(ctx, `
WITH c AS (UPDATE conversations SET message_count = message_count + 1 WHERE id = $1 RETURNING tenant_id, id, message_count, run_count)
INSERT INTO messages (tenant_id, id, conversation_id, run_seq, position, role, content, parts)
SELECT tenant_id, gen_random_uuid(), id, run_count, message_count, $2, $3, $4 FROM c`, convID, r[0], r[1], r[2])
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
	return texts
}

// cwBlock is a content block of a request as the Anthropic wire format carries it.
type cwBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   []cwBlock       `json:"content"`
	Source    struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

type cwMessage struct {
	Role    string    `json:"role"`
	Content []cwBlock `json:"content"`
}

type cwRequest struct {
	System   []cwBlock   `json:"system"`
	Messages []cwMessage `json:"messages"`
	Tools    []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

func cwParse(t *testing.T, req llmtest.Request) cwRequest {
	t.Helper()
	var r cwRequest
	require.NoError(t, json.Unmarshal(req.Raw, &r))
	return r
}

func (r cwRequest) system() string {
	var b strings.Builder
	for _, s := range r.System {
		b.WriteString(s.Text)
	}
	return b.String()
}

// texts lists every message's text, tool result and tool input, in order.
func (r cwRequest) texts() []string {
	var out []string
	for _, m := range r.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				out = append(out, b.Text)
			case "tool_result":
				for _, c := range b.Content {
					out = append(out, c.Text)
				}
			}
		}
	}
	return out
}

// tokens estimates the request as the context window does.
func (r cwRequest) tokens() int {
	n := contextwin.EstimateText(r.system())
	for _, tl := range r.Tools {
		n += contextwin.EstimateText(tl.Name) + contextwin.EstimateText(tl.Description) + contextwin.EstimateText(string(tl.InputSchema))
	}
	for _, m := range r.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				n += contextwin.EstimateText(b.Text)
			case "tool_use":
				n += contextwin.EstimateText(b.Name) + contextwin.EstimateText(string(b.Input))
			case "tool_result":
				for _, c := range b.Content {
					n += contextwin.EstimateText(c.Text)
				}
			case "image":
				n += contextwin.ImageTokens
			}
		}
	}
	return n
}

// requirePairs fails when a tool call and its result are not both in the request, the result
// in the message right after the call, and no call is answered as "not run".
func (r cwRequest) requirePairs(t *testing.T) {
	t.Helper()
	for i, m := range r.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				require.Less(t, i+1, len(r.Messages), "call %s without a following message", b.ID)
				found := false
				for _, nb := range r.Messages[i+1].Content {
					if nb.Type == "tool_result" && nb.ToolUseID == b.ID {
						found = true
						for _, c := range nb.Content {
							require.NotContains(t, c.Text, "not run", "call %s lost its stored result", b.ID)
						}
					}
				}
				require.True(t, found, "call %s separated from its result", b.ID)
			case "tool_result":
				require.Positive(t, i, "result %s opens the conversation", b.ToolUseID)
				found := false
				for _, pb := range r.Messages[i-1].Content {
					found = found || (pb.Type == "tool_use" && pb.ID == b.ToolUseID)
				}
				require.True(t, found, "result %s separated from its call", b.ToolUseID)
			}
		}
	}
}

// requireTail fails unless the request's last texts are want, verbatim and in order.
func (r cwRequest) requireTail(t *testing.T, want []string) {
	t.Helper()
	got := r.texts()
	require.GreaterOrEqual(t, len(got), len(want))
	require.Equal(t, want, got[len(got)-len(want):])
}

func cwWindowEvents(t *testing.T, c *chatEnv, runID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range c.eventsOf(t, runID) {
		if e.Type == "context.window.applied" {
			var d map[string]any
			require.NoError(t, json.Unmarshal(e.Data, &d))
			out = append(out, d)
		}
	}
	return out
}

func (c *cwEnv) turn(t *testing.T, conv, content string) sent {
	t.Helper()
	s, res := c.send(t, conv, content, nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	r := c.waitRun(t, s.RunID, 30*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	return s
}

func TestContextWindowLongConversation(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	budget := cwContext - contextwin.SafetyMargin
	conv := c.conversation(t, nil)
	texts := c.seed(t, conv, 299)

	s1 := c.turn(t, conv, "question 300: where were we?")
	mains, sums := c.counts()
	require.Len(t, mains, 1)
	require.Len(t, sums, 1, "one summarisation call folds in the older messages")
	first := cwParse(t, mains[0])
	require.LessOrEqual(t, first.tokens(), budget, "the request fits the budget")
	first.requireTail(t, append(texts[len(texts)-3:], "question 300: where were we?"))
	first.requirePairs(t)
	require.Contains(t, first.system(), "<conversation_summary>")
	require.Contains(t, first.system(), "SUMMARY-1:")
	for _, txt := range first.texts() {
		require.NotContains(t, txt, "SUMMARY-1", "the summary travels as a system message")
	}
	require.NotContains(t, strings.Join(first.texts(), "\n"), texts[0], "the oldest messages are summarised, not sent")
	// The summariser saw the oldest messages with the mode's prompt.
	sum := cwParse(t, sums[0])
	require.True(t, strings.HasPrefix(sum.system(), contextwin.SummaryPrompt("DEFAULT")))
	require.Contains(t, strings.Join(sum.texts(), "\n"), texts[0][:30])

	evs := cwWindowEvents(t, c.chatEnv, s1.RunID)
	require.Len(t, evs, 1)
	ev := evs[0]
	require.Equal(t, "PRESERVE", ev["strategy"])
	require.Equal(t, false, ev["fallback"])
	require.Equal(t, "over_budget", ev["reason"])
	require.Greater(t, ev["tokensBefore"].(float64), ev["tokensAfter"].(float64))
	require.Greater(t, ev["tokensBefore"].(float64), float64(budget))
	// Every message is either summarised or kept whole (a lead note may open the kept part).
	require.InDelta(t, 300.5, ev["messagesSummarized"].(float64)+ev["messagesKept"].(float64), 0.5)
	summarised := int(ev["messagesSummarized"].(float64))
	kept := append(append([]string(nil), texts[summarised:]...), "question 300: where were we?")
	first.requireTail(t, kept)
	require.LessOrEqual(t, len(first.texts()), len(kept)+1)
	// The summary is stored with the conversation, and metered on the run.
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM conversations WHERE summary LIKE 'SUMMARY-1:%' AND summarized_through IS NOT NULL`))
	var shown struct{ Conversation struct{ Summary *string } }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { conversation(id: $id) { summary } }`, map[string]any{"id": conv}).Decode(t, &shown)
	require.NotNil(t, shown.Conversation.Summary)
	require.True(t, strings.HasPrefix(*shown.Conversation.Summary, "SUMMARY-1:"))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE call_index = -1 AND model = $1 AND input_tokens = 900`, cwSummaryModel))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs r WHERE r.input_tokens = (SELECT sum(input_tokens) FROM usage_records u WHERE u.run_id = r.id)`))

	// The next turn reuses the summary: no summarisation call.
	c.turn(t, conv, "question 301: and now?")
	mains, sums = c.counts()
	require.Len(t, mains, 2)
	require.Len(t, sums, 1, "the stored summary is reused, not regenerated")
	second := cwParse(t, mains[1])
	require.LessOrEqual(t, second.tokens(), budget)
	require.Contains(t, second.system(), "SUMMARY-1:")
	second.requireTail(t, []string{texts[len(texts)-1], "question 300: where were we?", "ok", "question 301: and now?"})
	second.requirePairs(t)
}

func TestContextWindowSummariserFailureFallsBack(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]llmtest.Reply{
		"error":   llmtest.Error(http.StatusInternalServerError, "summariser is down"),
		"timeout": {Steps: []llmtest.Step{llmtest.Text("too late")}, HeaderDelay: 10 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCWEnv(t, nil)
			c.App.Context.SetSummaryTimeout(300 * time.Millisecond)
			c.summary = func(int, llmtest.Request) llmtest.Reply { return reply }
			conv := c.conversation(t, nil)
			texts := c.seed(t, conv, 120)
			s := c.turn(t, conv, "what did we decide?")
			mains, sums := c.counts()
			require.Len(t, mains, 1)
			require.Len(t, sums, 1)
			req := cwParse(t, mains[0])
			require.LessOrEqual(t, req.tokens(), cwContext-contextwin.SafetyMargin)
			req.requirePairs(t)
			// Older messages reach the model cut to 150 characters.
			truncated := 0
			for _, txt := range texts[:len(texts)-len(req.texts())] {
				if len([]rune(txt)) > contextwin.FallbackChars && strings.Contains(req.system(), string([]rune(txt)[:contextwin.FallbackChars])+"…") {
					truncated++
					require.NotContains(t, req.system(), string([]rune(txt)[:contextwin.FallbackChars+1]))
				}
			}
			require.Positive(t, truncated)
			evs := cwWindowEvents(t, c.chatEnv, s.RunID)
			require.Len(t, evs, 1)
			require.Equal(t, true, evs[0]["fallback"])
			require.NotEmpty(t, evs[0]["error"])
			require.Positive(t, evs[0]["messagesSummarized"])
			// Nothing is stored as a summary or metered for the failed call.
			require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE summary IS NOT NULL`))
			require.Zero(t, c.count(t, `SELECT count(*) FROM usage_records WHERE call_index < 0`))
		})
	}
}

// TestCancelWhileSummarisingIsMetered: a run cancelled while the summariser answers ends
// CANCELLED, and the summarisation call it cut is metered (a usage record at a negative call
// index, with the request's estimated input): the provider had the request.
func TestCancelWhileSummarisingIsMetered(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	c.summary = func(int, llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.Wait(gate), llmtest.Text("never sent"))
	}
	conv := c.conversation(t, nil)
	c.seed(t, conv, 120)
	s, res := c.send(t, conv, "where were we?", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Eventually(t, func() bool { _, sums := c.counts(); return len(sums) == 1 }, 15*time.Second, 10*time.Millisecond)
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "CANCELLED", c.waitRun(t, s.RunID, 10*time.Second).Status)
	runID := approvalUUID(t, "Run", s.RunID)
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1`, runID) == 1
	}, 5*time.Second, 10*time.Millisecond, "the cut summarisation call was not metered")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1 AND call_index < 0 AND input_tokens > 1000 AND cost_micros > 0`, runID))
	var out struct{ Run struct{ InputTokens int } }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { inputTokens } }`, map[string]any{"id": s.RunID}).Decode(t, &out)
	require.Greater(t, out.Run.InputTokens, 1000, "the run's usage counts the call")
	mains, _ := c.counts()
	require.Empty(t, mains, "the run made no call of its own")
}

func TestContextStrategiesChangeRequestSize(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	size := map[string]int{}
	for _, strategy := range []string{"PRESERVE", "COMPACT", "SUMMARIZE"} {
		c.settings(t, map[string]any{"contextStrategy": strategy})
		conv := c.conversation(t, nil)
		texts := c.seed(t, conv, 59) // about 6,000 tokens: under the budget
		before, _ := c.counts()
		c.turn(t, conv, "next question")
		mains, _ := c.counts()
		require.Len(t, mains, len(before)+1)
		req := cwParse(t, mains[len(mains)-1])
		req.requirePairs(t)
		size[strategy] = req.tokens()
		switch strategy {
		case "PRESERVE":
			require.Contains(t, req.texts(), texts[0], "under budget, PRESERVE sends everything")
			require.NotContains(t, req.system(), "<conversation_summary>")
		case "COMPACT":
			require.Contains(t, req.system(), "<conversation_summary>")
			require.LessOrEqual(t, size[strategy], (cwContext-contextwin.SafetyMargin)/2)
		case "SUMMARIZE":
			require.Contains(t, req.system(), "<conversation_summary>")
			require.LessOrEqual(t, len(req.Messages), contextwin.KeepMessages+1)
		}
	}
	require.Greater(t, size["PRESERVE"], size["COMPACT"], "%v", size)
	require.Greater(t, size["COMPACT"], size["SUMMARIZE"], "%v", size)
}

func TestContextModesPromptsAndUpdateConversation(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	c.settings(t, map[string]any{"contextStrategy": "SUMMARIZE"})
	convs := map[string]string{}
	for _, mode := range contextwin.Modes {
		conv := c.conversation(t, map[string]any{"mode": mode})
		convs[mode] = conv
		c.seed(t, conv, 12)
		_, before := c.counts()
		c.turn(t, conv, "let us go on")
		mains, sums := c.counts()
		require.Len(t, sums, len(before)+1, mode)
		sum := cwParse(t, sums[len(sums)-1])
		require.True(t, strings.HasPrefix(sum.system(), contextwin.SummaryPrompt(mode)), "%s: %s", mode, sum.system())
		main := cwParse(t, mains[len(mains)-1])
		if mode != "DEFAULT" {
			require.Contains(t, main.system(), contextwin.ModeInstruction(mode), mode)
		}
		for _, other := range contextwin.Modes {
			if other != mode && other != "DEFAULT" {
				require.NotContains(t, main.system(), contextwin.ModeInstruction(other), mode)
			}
		}
	}

	// updateConversation changes the mode (and the rest) of a conversation.
	const update = `mutation($id: ID!, $in: UpdateConversationInput!) { updateConversation(id: $id, input: $in) { id title mode systemPrompt agentic } }`
	var out struct {
		UpdateConversation struct {
			Title, Mode, SystemPrompt *string
			Agentic                   bool
		}
	}
	c.Do(t, c.s.AccessToken, update, map[string]any{"id": convs["DEFAULT"], "in": map[string]any{
		"mode": "GAME", "systemPrompt": "You run a space adventure called Starfall.", "title": "Starfall", "agentic": false,
	}}).Decode(t, &out)
	require.Equal(t, "GAME", *out.UpdateConversation.Mode)
	require.Equal(t, "Starfall", *out.UpdateConversation.Title)
	require.False(t, out.UpdateConversation.Agentic)
	c.seed(t, convs["DEFAULT"], 8)
	_, before := c.counts()
	c.turn(t, convs["DEFAULT"], "I open the airlock")
	mains, sums := c.counts()
	require.Len(t, sums, len(before)+1)
	require.True(t, strings.HasPrefix(cwParse(t, sums[len(sums)-1]).system(), contextwin.SummaryPrompt("GAME")))
	main := cwParse(t, mains[len(mains)-1])
	require.Contains(t, main.system(), contextwin.ModeInstruction("GAME"))
	require.Contains(t, main.system(), "You run a space adventure called Starfall.")
	require.Empty(t, main.Tools, "agentic false: no tools")

	// An empty title clears it; other fields stay.
	c.Do(t, c.s.AccessToken, update, map[string]any{"id": convs["DEFAULT"], "in": map[string]any{"title": ""}}).Decode(t, &out)
	require.Nil(t, out.UpdateConversation.Title)
	require.Equal(t, "GAME", *out.UpdateConversation.Mode)
	// Bad input, and another tenant's conversation.
	res := c.Do(t, c.s.AccessToken, update, map[string]any{"id": convs["DEFAULT"], "in": map[string]any{"title": strings.Repeat("x", 501)}})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	other := c.SignUp(t, "", "")
	res = c.Do(t, other.AccessToken, update, map[string]any{"id": convs["DEFAULT"], "in": map[string]any{"mode": "BROWSER"}})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
}

func TestContextPreferencesChangeSystemPrompt(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	conv := c.conversation(t, nil)
	c.turn(t, conv, "hello")
	c.settings(t, map[string]any{"personality": "CREATIVE", "verbosity": "VERBOSE"})
	c.turn(t, conv, "hello again")
	c.settings(t, map[string]any{"personality": "MINIMAL", "verbosity": "MINIMAL"})
	c.turn(t, conv, "and once more")
	mains, _ := c.counts()
	require.Len(t, mains, 3)
	sys := []string{cwParse(t, mains[0]).system(), cwParse(t, mains[1]).system(), cwParse(t, mains[2]).system()}
	require.Contains(t, sys[0], "Be helpful and balanced in tone.")
	require.Contains(t, sys[0], "Answer at a normal length.")
	require.Contains(t, sys[1], "Be creative; offer ideas and alternatives.")
	require.Contains(t, sys[1], "Explain your reasoning and answers in detail.")
	require.NotContains(t, sys[1], "Be helpful and balanced in tone.")
	require.Contains(t, sys[2], "Be minimal; say only what is needed.")
	require.Contains(t, sys[2], "Answer in as few words as possible.")
	require.NotEqual(t, sys[0], sys[1])
	require.NotEqual(t, sys[1], sys[2])
}

func TestContextMemoryRecall(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	c.main = func(n int, req llmtest.Request) llmtest.Reply {
		if n == 1 {
			return llmtest.Stream(
				llmtest.ToolCall("r1", "remember", `{"content":"The user's favourite colour is teal."}`),
				llmtest.ToolCall("r2", "remember", `{"content":"The staging server is called hercules."}`))
		}
		return llmtest.Stream(llmtest.Text("noted"))
	}
	c.turn(t, c.conversation(t, nil), "Remember: my favourite colour is teal, and staging is hercules.")

	// Another user of the tenant, and another tenant, keep similar facts.
	colleagueAcct := c.SignUp(t, "", "")
	memJoin(t, c.Env, c.s.AccessToken, colleagueAcct, c.s.TenantID, "MEMBER")
	_, colleague := isoDecodeID(t, colleagueAcct.UserID)
	_, tenantA := isoDecodeID(t, c.s.TenantID)
	cwExec(t, c.OwnerURL, `INSERT INTO memories (tenant_id, id, user_id, project_id, content)
SELECT $1, gen_random_uuid(), $2, id, 'The favourite colour of this user is magenta.' FROM projects WHERE tenant_id = $1 AND is_default`, tenantA, colleague)
	b := c.SignUp(t, "", "")
	_, tenantB := isoDecodeID(t, b.TenantID)
	_, userB := isoDecodeID(t, b.UserID)
	cwExec(t, c.OwnerURL, `INSERT INTO memories (tenant_id, id, user_id, project_id, content)
SELECT $1, gen_random_uuid(), $2, id, 'The favourite colour of this user is crimson.' FROM projects WHERE tenant_id = $1 AND is_default`, tenantB, userB)
	// A task of the project shows in the context too.
	c.Do(t, c.s.AccessToken, `mutation { createTask(input: {title: "Design the new logo", priority: HIGH}) { id } }`, nil).Decode(t, &struct{}{})

	const list = `query { memories { edges { node { id content projectId } } } }`
	var mems struct {
		Memories struct {
			Edges []struct {
				Node struct{ ID, Content, ProjectID string }
			}
		}
	}
	c.Do(t, c.s.AccessToken, list, nil).Decode(t, &mems)
	require.Len(t, mems.Memories.Edges, 2)
	var teal string
	for _, e := range mems.Memories.Edges {
		if strings.Contains(e.Node.Content, "teal") {
			teal = e.Node.ID
		}
	}
	require.NotEmpty(t, teal)

	conv := c.conversation(t, nil)
	c.turn(t, conv, "Which colour should the logo use? Pick my favourite.")
	mains, _ := c.counts()
	sys := cwParse(t, mains[len(mains)-1]).system()
	require.Contains(t, sys, "The user's favourite colour is teal.")
	require.NotContains(t, sys, "hercules", "an irrelevant memory stays out")
	require.NotContains(t, sys, "magenta", "another user's memory never appears")
	require.NotContains(t, sys, "crimson", "another tenant's memory never appears")
	require.Contains(t, sys, "Project: Default")
	require.Contains(t, sys, "Design the new logo")

	// Another tenant neither sees nor deletes the memory.
	var bMems struct {
		Memories struct {
			Edges []struct{ Node struct{ Content string } }
		}
	}
	c.Do(t, b.AccessToken, list, nil).Decode(t, &bMems)
	require.Len(t, bMems.Memories.Edges, 1)
	require.Contains(t, bMems.Memories.Edges[0].Node.Content, "crimson")
	res := c.Do(t, b.AccessToken, `mutation($id: ID!) { deleteMemory(id: $id) }`, map[string]any{"id": teal})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)

	// Deleted, it is no longer recalled.
	var del struct{ DeleteMemory bool }
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { deleteMemory(id: $id) }`, map[string]any{"id": teal}).Decode(t, &del)
	require.True(t, del.DeleteMemory)
	c.turn(t, conv, "Which colour was my favourite again?")
	mains, _ = c.counts()
	require.NotContains(t, cwParse(t, mains[len(mains)-1]).system(), "teal")
	c.Do(t, c.s.AccessToken, list, nil).Decode(t, &mems)
	require.Len(t, mems.Memories.Edges, 1)
}

func cwPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 3))))
	return b.Bytes()
}

// cwPDF is a one-page PDF showing text in Helvetica.
var cwPDF = extracttest.TextPDF

func attachment(name, mediaType string, data []byte) map[string]any {
	return map[string]any{"filename": name, "mediaType": mediaType, "dataBase64": base64.StdEncoding.EncodeToString(data)}
}

func TestAttachmentsReachTheModel(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, map[string]string{"AGENTRY_MAX_BODY_BYTES": fmt.Sprint(16 << 20)})
	conv := c.conversation(t, nil)
	img := cwPNG(t)
	s, res := c.send(t, conv, "Here are my files.", map[string]any{"attachments": []any{
		attachment("notes.txt", "text/plain", []byte("The secret word is pineapple.")),
		attachment("report.pdf", "application/pdf", cwPDF("Quarterly revenue grew 42 percent")),
		attachment("chart.png", "image/png", img),
	}})
	require.Empty(t, res.Errors, "%s", res.Body)
	r := c.waitRun(t, s.RunID, 30*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	mains, _ := c.counts()
	req := cwParse(t, mains[0])
	require.Len(t, req.Messages, 1)
	blocks := req.Messages[0].Content
	require.Len(t, blocks, 4)
	require.Equal(t, "Here are my files.", blocks[0].Text)
	require.Equal(t, "text", blocks[1].Type)
	require.Contains(t, blocks[1].Text, `filename="notes.txt"`)
	require.Contains(t, blocks[1].Text, "The secret word is pineapple.")
	require.Equal(t, "text", blocks[2].Type)
	require.Contains(t, blocks[2].Text, `filename="report.pdf"`)
	require.Contains(t, blocks[2].Text, "Quarterly revenue grew 42 percent")
	require.Equal(t, "image", blocks[3].Type)
	require.Equal(t, "base64", blocks[3].Source.Type)
	require.Equal(t, "image/png", blocks[3].Source.MediaType)
	require.Equal(t, base64.StdEncoding.EncodeToString(img), blocks[3].Source.Data)
	// Stored with the message.
	var msgs struct {
		Conversation struct {
			Messages struct {
				Edges []struct {
					Node struct {
						Content string
						Parts   json.RawMessage
					}
				}
			}
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { conversation(id: $id) { messages { edges { node { content parts } } } } }`, map[string]any{"id": conv}).Decode(t, &msgs)
	require.Equal(t, "Here are my files.", msgs.Conversation.Messages.Edges[0].Node.Content)
	var parts []llm.Block
	require.NoError(t, json.Unmarshal(msgs.Conversation.Messages.Edges[0].Node.Parts, &parts))
	require.Len(t, parts, 4)
	require.Equal(t, img, parts[3].Data)

	// Refusals: a clear BAD_USER_INPUT, and nothing stored.
	messages := func() int { return c.count(t, `SELECT count(*) FROM messages`) }
	runs := func() int { return c.count(t, `SELECT count(*) FROM runs`) }
	m0, r0 := messages(), runs()
	noVision := c.conversation(t, map[string]any{"model": "anthropic:claude-private-model"})
	many := make([]any, 6)
	for i := range many {
		many[i] = attachment(fmt.Sprintf("f%d.txt", i), "text/plain", []byte("x"))
	}
	for name, tc := range map[string]struct {
		conv string
		atts []any
		want string
	}{
		"oversized":   {conv, []any{attachment("big.txt", "text/plain", bytes.Repeat([]byte("a"), 5<<20+1))}, "5 MiB"},
		"unsupported": {conv, []any{attachment("a.zip", "application/zip", []byte("PK\x03\x04zip"))}, "not supported"},
		"too many":    {conv, many, "at most 5"},
		"not base64":  {conv, []any{map[string]any{"filename": "a.txt", "mediaType": "text/plain", "dataBase64": "%%%"}}, "base64"},
		"fake image":  {conv, []any{attachment("a.png", "image/png", []byte("just text"))}, "not a readable image"},
		"no vision":   {noVision, []any{attachment("chart.png", "image/png", img)}, "does not accept images"},
	} {
		_, res := c.send(t, tc.conv, "look at this", map[string]any{"attachments": tc.atts})
		require.NotNil(t, res, name)
		require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s: %s", name, res.Body)
		require.Contains(t, res.Errors[0].Message, tc.want, name)
	}
	require.Equal(t, m0, messages(), "a refused message stores nothing")
	require.Equal(t, r0, runs())
	// Text and PDFs are fine for a model without vision.
	s, res = c.send(t, noVision, "read this", map[string]any{"attachments": []any{attachment("a.md", "text/markdown", []byte("# hi"))}})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 30*time.Second).Status)
}

func TestContextLengthErrorCompactsAndRetries(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	c.main = func(n int, req llmtest.Request) llmtest.Reply {
		if n == 1 {
			return llmtest.Error(http.StatusBadRequest, "prompt is too long: 250000 tokens > 200000 maximum")
		}
		return llmtest.Stream(llmtest.Text("fits now"))
	}
	conv := c.conversation(t, nil)
	texts := c.seed(t, conv, 30) // well under the budget: only the provider objects
	s := c.turn(t, conv, "continue please")
	mains, sums := c.counts()
	require.Len(t, mains, 2)
	require.Len(t, sums, 1)
	first, second := cwParse(t, mains[0]), cwParse(t, mains[1])
	require.Contains(t, first.texts(), texts[0])
	require.NotContains(t, second.texts(), texts[0])
	require.Less(t, second.tokens(), first.tokens()/2)
	require.Contains(t, second.system(), "SUMMARY-1:")
	second.requirePairs(t)
	second.requireTail(t, append(texts[len(texts)-3:], "continue please"))
	evs := c.eventsOf(t, s.RunID)
	require.Zero(t, countType(evs, "task.retrying"), "retried within the same attempt")
	win := cwWindowEvents(t, c.chatEnv, s.RunID)
	require.Len(t, win, 1)
	require.Equal(t, "context_length", win[0]["reason"])
	var attempt struct{ Run struct{ Attempt int } }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { attempt } }`, map[string]any{"id": s.RunID}).Decode(t, &attempt)
	require.Equal(t, 1, attempt.Run.Attempt)
}

// TestContextSummaryReservedAgainstTheBudget: context summaries are model calls like the
// run's own. Under a roomy tenant budget a summary is reserved before it is made and settled
// with its usage record; under a budget just above one turn's cost, the summary (which would
// cost more than the turn) is refused, the window falls back to truncation and the turn still
// completes. A watcher sampling the budget every 10 ms never sees spent + reserved above the
// limit, and the usage records of the summaries equal their settled reservations.
func TestContextSummaryReservedAgainstTheBudget(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	c.settings(t, map[string]any{"maxTokensPerTask": 1024})
	bud := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 10_000_000})
	budgetID := approvalUUID(t, "Budget", bud.ID).String()
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		watched <- usWatch(c.OwnerURL, stop, func(s, r, l int64) error {
			if s+r > l {
				return fmt.Errorf("spent %d + reserved %d > limit %d", s, r, l)
			}
			return nil
		}, budgetID)
	}()
	defer func() {
		close(stop)
		require.NoError(t, usWait(watched))
	}()

	type res struct {
		call                     int
		status                   string
		reserved, actual, record int64
	}
	reservations := func(runID string) []res {
		var out []res
		c.ownerTx(t, func(tx pgx.Tx) {
			rows, err := tx.Query(context.Background(), `SELECT v.call_index, v.status, v.reserved_tokens, coalesce(v.actual_tokens, 0),
				coalesce((SELECT u.input_tokens + u.output_tokens FROM usage_records u WHERE u.run_id = v.run_id AND u.call_index = v.call_index), -1)
				FROM reservations v WHERE v.run_id = $1 ORDER BY v.call_index`, approvalUUID(t, "Run", runID))
			require.NoError(t, err)
			for rows.Next() {
				var x res
				require.NoError(t, rows.Scan(&x.call, &x.status, &x.reserved, &x.actual, &x.record))
				out = append(out, x)
			}
			require.NoError(t, rows.Err())
		})
		return out
	}

	// A roomy budget: the summary is reserved, then settled with its usage record.
	roomy := c.conversation(t, nil)
	c.seed(t, roomy, 299)
	s1 := c.turn(t, roomy, "question 300: where were we?")
	_, sums := c.counts()
	require.Len(t, sums, 1)
	got := reservations(s1.RunID)
	require.Len(t, got, 2, "the summary and the turn's call: %+v", got)
	summary, main := got[0], got[1]
	require.Equal(t, -1, summary.call)
	require.Equal(t, "SETTLED", summary.status)
	require.Equal(t, int64(930), summary.actual, "the summary's usage (900 in, 30 out)")
	require.Equal(t, summary.actual, summary.record, "the usage record equals the settled reservation")
	require.Greater(t, summary.reserved, summary.actual, "the worst case covers the call")
	require.Equal(t, 0, main.call)
	require.Equal(t, "SETTLED", main.status)
	require.Equal(t, main.actual, main.record)

	// A budget just above one turn's cost and below a summary's worst case.
	spent, _, _ := c.budgetRow(t, bud.ID)
	room := main.reserved + 6_000 // a truncated history sends more than a summarised one
	require.Less(t, room, summary.reserved, "the summary would not fit")
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": spent + room})
	tight := c.conversation(t, nil)
	c.seed(t, tight, 299)
	s2 := c.turn(t, tight, "question 300: and here?")
	_, sums = c.counts()
	require.Len(t, sums, 1, "the refused summary was never made")
	evs := cwWindowEvents(t, c.chatEnv, s2.RunID)
	require.Len(t, evs, 1)
	require.Equal(t, true, evs[0]["fallback"])
	require.Contains(t, evs[0]["error"], "budget", "the refusal is the budget's")
	got = reservations(s2.RunID)
	require.Len(t, got, 1, "only the turn's call was reserved: %+v", got)
	require.Equal(t, 0, got[0].call)
	require.Equal(t, "SETTLED", got[0].status)
	final, reserved, limit := c.budgetRow(t, bud.ID)
	require.LessOrEqual(t, final, limit)
	require.Zero(t, reserved)

	// Every summary's usage record is its settled reservation, and none is held.
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE call_index < 0`))
	require.Zero(t, c.count(t, `SELECT count(*) FROM usage_records u WHERE u.call_index < 0 AND NOT EXISTS (
		SELECT 1 FROM reservations v WHERE v.run_id = u.run_id AND v.call_index = u.call_index AND v.status = 'SETTLED'
		AND v.actual_tokens = u.input_tokens + u.output_tokens)`))
	require.Zero(t, c.count(t, `SELECT count(*) FROM reservations WHERE status = 'HELD'`))
}
