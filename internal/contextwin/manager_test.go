package contextwin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// models resolves every reference to one fake provider, with the catalogue's entry.
type models struct{ p *llmtest.Fake }

func (m models) Resolve(ref string) (llm.Provider, llm.Model, error) {
	prov, id, err := llm.ParseModelRef(ref)
	if err != nil {
		return nil, llm.Model{}, err
	}
	return m.p, llm.Lookup(prov, id), nil
}

const mainRef = "anthropic:claude-sonnet-4-5"

type bundle struct {
	fake  *llmtest.Fake
	m     *contextwin.Manager
	model llm.Model
}

// setup returns a manager whose main model has a context of contextTokens (budget
// contextTokens - system - 20,000) and a fake summariser answering "SUMMARY n".
func setup(t *testing.T, contextTokens int) *bundle {
	t.Helper()
	f := llmtest.NewFake("anthropic")
	n := 0
	f.SetResponder(func(llm.Request) llmtest.Reply {
		n++
		return llmtest.Stream(llmtest.Text(fmt.Sprintf("SUMMARY %d", n)), llmtest.Usage(500, 20, 0))
	})
	m := contextwin.New(contextwin.Options{Models: models{f}})
	if contextTokens > 0 {
		m.SetContextTokens(mainRef, contextTokens)
	}
	return &bundle{fake: f, m: m, model: llm.Lookup("anthropic", "claude-sonnet-4-5")}
}

func msg(role string, blocks ...llm.Block) dbsqlc.Message {
	parts, _ := json.Marshal(blocks)
	return dbsqlc.Message{ID: uuid.Must(uuid.NewV7()), Role: role, Content: llm.Message{Blocks: blocks}.Text(), Parts: parts}
}

func text(s string) llm.Block { return llm.Block{Type: llm.BlockText, Text: s} }

// history makes n messages of about 100 tokens each: user / assistant turns, every fifth turn
// with a tool call and its result.
func history(n int) []dbsqlc.Message {
	var out []dbsqlc.Message
	for i := 0; len(out) < n; i++ {
		body := strings.Repeat(fmt.Sprintf("m%03d ", i), 80)[:400]
		out = append(out, msg("USER", text(fmt.Sprintf("question %d: %s", i, body))))
		if i%5 == 4 {
			id := fmt.Sprintf("call_%d", i)
			out = append(out, msg("ASSISTANT", text("let me look"), llm.Block{Type: llm.BlockToolUse, ID: id, Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)}))
			out = append(out, msg("TOOL", llm.Block{Type: llm.BlockToolResult, ToolUseID: id, Content: "result " + body}))
		}
		out = append(out, msg("ASSISTANT", text(fmt.Sprintf("answer %d: %s", i, body))))
	}
	return out[:n]
}

func conv(mode string) dbsqlc.Conversation {
	return dbsqlc.Conversation{ID: uuid.Must(uuid.NewV7()), Mode: mode, Model: mainRef}
}

func tokens(w contextwin.Window) int {
	n := contextwin.EstimateText(w.System)
	for _, m := range w.Messages {
		n += contextwin.EstimateMessage(m)
	}
	return n
}

// checkPairs fails when a kept tool result's call is not kept, or a kept call's result is not.
func checkPairs(t *testing.T, msgs []dbsqlc.Message) {
	t.Helper()
	calls, results := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		var blocks []llm.Block
		_ = json.Unmarshal(m.Parts, &blocks)
		for _, b := range blocks {
			switch b.Type {
			case llm.BlockToolUse:
				calls[b.ID] = true
			case llm.BlockToolResult:
				require.True(t, calls[b.ToolUseID], "result of %s kept without its call", b.ToolUseID)
				results[b.ToolUseID] = true
			}
		}
	}
	for id := range calls {
		require.True(t, results[id], "call %s kept without its result", id)
	}
}

func TestEstimates(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, contextwin.EstimateText(""))
	require.Equal(t, 1, contextwin.EstimateText("abc"))
	require.Equal(t, 25, contextwin.EstimateText(strings.Repeat("x", 100)))
	m := msg("USER", text(strings.Repeat("x", 400)), llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: []byte("png")})
	require.Equal(t, 100+contextwin.ImageTokens, contextwin.EstimateMessage(m))
	// A message without parts counts its content.
	require.Equal(t, 2, contextwin.EstimateMessage(dbsqlc.Message{Role: "SYSTEM", Content: "12345678"}))
}

func TestBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	require.Equal(t, 200_000-1_000-contextwin.SafetyMargin, b.m.Budget(b.model, 1_000))
	require.Equal(t, contextwin.UnknownModelBudget, b.m.Budget(llm.Lookup("anthropic", "some-future-model"), 1_000))
	b.m.SetContextTokens(mainRef, 30_000)
	require.Equal(t, 30_000-500-contextwin.SafetyMargin, b.m.Budget(b.model, 500))
	b.m.SetContextTokens(mainRef, 10)
	require.Equal(t, contextwin.MinBudget, b.m.Budget(b.model, 500))
}

func TestFitsWithoutSummary(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	hist := history(20)
	w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, System: "sys", History: hist})
	require.NoError(t, err)
	require.Nil(t, w.Applied)
	require.Equal(t, hist, w.Messages)
	require.Equal(t, "sys", w.System)
	require.Zero(t, b.fake.Calls())
}

func TestPreserveOverBudgetSummarisesOlderMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, 28_000) // budget about 8,000 tokens
	hist := history(300)  // about 30,000 tokens
	c := conv("DEFAULT")
	in := contextwin.Input{Conversation: c, Model: b.model, System: "base prompt", History: hist}
	w, err := b.m.Apply(context.Background(), in)
	require.NoError(t, err)
	a := w.Applied
	require.NotNil(t, a)
	require.Equal(t, contextwin.ReasonOverBudget, a.Reason)
	require.False(t, a.Fallback)
	require.Equal(t, "SUMMARY 1", a.Summary)
	require.Equal(t, 300, a.MessagesSummarized+len(w.Messages))
	require.GreaterOrEqual(t, len(w.Messages), contextwin.KeepMessages)
	require.LessOrEqual(t, tokens(w), w.Budget)
	require.LessOrEqual(t, a.TokensAfter, w.Budget+contextwin.EstimateText("base prompt"))
	require.Greater(t, a.TokensBefore, 25_000)
	// The kept messages are the newest, verbatim, and their tool calls are whole.
	require.Equal(t, hist[len(hist)-len(w.Messages):], w.Messages)
	require.NotEqual(t, "TOOL", w.Messages[0].Role)
	checkPairs(t, w.Messages)
	// The summary is in the system prompt, after the base prompt.
	require.True(t, strings.HasPrefix(w.System, "base prompt\n\n<conversation_summary>"))
	require.Contains(t, w.System, "SUMMARY 1")
	require.Equal(t, a.Through, hist[len(hist)-len(w.Messages)-1].ID)
	// The summariser got the mode's prompt and the older messages.
	reqs := b.fake.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "claude-haiku-4-5", reqs[0].Model)
	require.True(t, strings.HasPrefix(reqs[0].System, contextwin.SummaryPrompt("DEFAULT")))
	require.Empty(t, reqs[0].Tools)
	require.Contains(t, reqs[0].Messages[0].Text(), "question 0:")
	require.Equal(t, int64(500), a.Usage.InputTokens)

	// Next turn: the stored summary is reused, not regenerated.
	s := a.Summary
	c.Summary, c.SummarizedThrough = &s, uuid.NullUUID{UUID: a.Through, Valid: true}
	hist = append(hist, msg("USER", text("one more question")), msg("ASSISTANT", text("one more answer")), msg("USER", text("and another")))
	w2, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: c, Model: b.model, System: "base prompt", History: hist})
	require.NoError(t, err)
	require.Nil(t, w2.Applied)
	require.Contains(t, w2.System, "SUMMARY 1")
	require.Equal(t, len(w.Messages)+3, len(w2.Messages))
	require.Equal(t, 1, b.fake.Calls())
}

func TestKeptPartStartingWithAnAssistantGetsALeadNote(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	hist := history(12)
	s := "earlier"
	c := conv("DEFAULT")
	c.Summary, c.SummarizedThrough = &s, uuid.NullUUID{UUID: hist[0].ID, Valid: true} // hist[1] is an answer
	w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: c, Model: b.model, History: hist})
	require.NoError(t, err)
	require.Equal(t, "USER", w.Messages[0].Role)
	require.Equal(t, hist[1:], w.Messages[1:])
}

func TestSummariserFailureFallsBackToTruncation(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]llmtest.Reply{
		"error":   llmtest.Error(http.StatusInternalServerError, "summariser down"),
		"timeout": {Steps: []llmtest.Step{llmtest.Text("too late")}, HeaderDelay: 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 28_000)
			b.m.SetSummaryTimeout(100 * time.Millisecond)
			b.fake.SetResponder(func(llm.Request) llmtest.Reply { return reply })
			hist := history(120)
			c := conv("DEFAULT")
			w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: c, Model: b.model, History: hist})
			require.NoError(t, err)
			a := w.Applied
			require.NotNil(t, a)
			require.True(t, a.Fallback)
			require.NotEmpty(t, a.Error)
			require.Empty(t, a.Summary, "a fallback is not stored as the summary")
			require.LessOrEqual(t, tokens(w), w.Budget)
			// The newest summarised message is there, cut to 150 characters.
			last := hist[len(hist)-len(w.Messages)-1]
			want := strings.Join(strings.Fields(last.Content), " ")
			require.Greater(t, len([]rune(want)), contextwin.FallbackChars)
			require.Contains(t, w.System, string([]rune(want)[:contextwin.FallbackChars])+"…")
			require.NotContains(t, w.System, string([]rune(want)[:contextwin.FallbackChars+1]))
			require.Equal(t, "fallback", map[bool]string{true: "fallback"}[a.EventData()["fallback"].(bool)])
		})
	}
}

func TestCancelledContextIsNotAFallback(t *testing.T) {
	t.Parallel()
	b := setup(t, 28_000)
	b.fake.SetResponder(func(llm.Request) llmtest.Reply {
		return llmtest.Reply{Steps: []llmtest.Step{llmtest.Text("late")}, HeaderDelay: 5 * time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := b.m.Apply(ctx, contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: history(300)})
	require.Error(t, err)
}

func TestStrategiesSendDifferentSizes(t *testing.T) {
	t.Parallel()
	hist := history(60) // about 6,000 tokens: under the budget of about 8,000
	size := map[string]int{}
	for _, s := range []string{contextwin.StrategyPreserve, contextwin.StrategyCompact, contextwin.StrategySummarize} {
		b := setup(t, 28_000)
		w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Strategy: s, Model: b.model, History: hist})
		require.NoError(t, err)
		size[s] = tokens(w)
		switch s {
		case contextwin.StrategyPreserve:
			require.Nil(t, w.Applied, "under budget, PRESERVE keeps everything")
			require.Len(t, w.Messages, 60)
		case contextwin.StrategyCompact:
			require.NotNil(t, w.Applied)
			require.LessOrEqual(t, size[s], w.Budget/2)
		case contextwin.StrategySummarize:
			require.NotNil(t, w.Applied)
			require.LessOrEqual(t, len(w.Messages), contextwin.KeepMessages+1)
		}
		checkPairs(t, w.Messages)
	}
	require.Greater(t, size["PRESERVE"], size["COMPACT"])
	require.Greater(t, size["COMPACT"], size["SUMMARIZE"])
}

func TestSummarizeStrategyWaitsForEnoughNewMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Strategy: "SUMMARIZE", Model: b.model, History: history(2*contextwin.KeepMessages - 1)})
	require.NoError(t, err)
	require.Nil(t, w.Applied)
	require.Zero(t, b.fake.Calls())
}

func TestEachModeHasItsOwnSummaryPrompt(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, mode := range contextwin.Modes {
		b := setup(t, 0)
		_, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv(mode), Strategy: "SUMMARIZE", Model: b.model, History: history(12)})
		require.NoError(t, err)
		reqs := b.fake.Requests()
		require.Len(t, reqs, 1, mode)
		p := contextwin.SummaryPrompt(mode)
		require.True(t, strings.HasPrefix(reqs[0].System, p), mode)
		require.False(t, seen[p], "%s shares a prompt", mode)
		seen[p] = true
		if mode != "DEFAULT" {
			require.NotEmpty(t, contextwin.ModeInstruction(mode))
		}
	}
	require.Contains(t, contextwin.SummaryPrompt("BRAINSTORM"), "confirmed requirements")
	require.Contains(t, contextwin.SummaryPrompt("OUTPUT_REFINE"), "applied")
	require.Contains(t, contextwin.SummaryPrompt("GAME"), "story")
}

func TestForceCompactsEvenUnderBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	hist := history(20)
	w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: hist, Force: true})
	require.NoError(t, err)
	require.NotNil(t, w.Applied)
	require.Equal(t, contextwin.ReasonContextLength, w.Applied.Reason)
	require.LessOrEqual(t, len(w.Messages), contextwin.KeepMessages+2)
	require.GreaterOrEqual(t, len(w.Messages), contextwin.KeepMessages)
	checkPairs(t, w.Messages)
}

func TestToolCallsAreNeverSplit(t *testing.T) {
	t.Parallel()
	// Whatever the budget, the kept part never starts inside a call's results.
	for ctxTokens := 20_500; ctxTokens <= 27_000; ctxTokens += 97 {
		b := setup(t, ctxTokens)
		b.fake.SetResponder(func(llm.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("S")) })
		hist := history(90)
		// a call with several results at the end
		hist = append(hist, msg("USER", text("do two things")),
			msg("ASSISTANT", llm.Block{Type: llm.BlockToolUse, ID: "x1", Name: "list_files", Input: json.RawMessage(`{}`)}, llm.Block{Type: llm.BlockToolUse, ID: "x2", Name: "list_files", Input: json.RawMessage(`{}`)}),
			msg("TOOL", llm.Block{Type: llm.BlockToolResult, ToolUseID: "x1", Content: "a"}),
			msg("TOOL", llm.Block{Type: llm.BlockToolResult, ToolUseID: "x2", Content: "b"}),
		)
		w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: hist})
		require.NoError(t, err)
		require.NotNil(t, w.Applied)
		kept := w.Messages
		if kept[0].ID == uuid.Nil {
			kept = kept[1:] // the lead note
		}
		require.GreaterOrEqual(t, len(kept), contextwin.KeepMessages)
		// Nothing is lost: the older messages are summarised, the newer kept whole.
		require.Equal(t, len(hist), w.Applied.MessagesSummarized+len(kept), "context %d", ctxTokens)
		require.Equal(t, hist[len(hist)-len(kept):], kept)
		checkPairs(t, w.Messages)
	}
}

func TestSummaryModel(t *testing.T) {
	t.Parallel()
	f := llmtest.NewFake("anthropic")
	m := contextwin.New(contextwin.Options{Models: models{f}})
	_, model, ref, err := m.SummaryModel("anthropic:claude-opus-4-5")
	require.NoError(t, err)
	require.Equal(t, "anthropic:claude-haiku-4-5", ref)
	require.Equal(t, "claude-haiku-4-5", model.ID)
	_, _, ref, _ = m.SummaryModel("openai:gpt-4.1")
	require.Equal(t, "openai:gpt-4o-mini", ref)
	_, _, ref, _ = m.SummaryModel("openai:llama3.2") // a local server's own model
	require.Equal(t, "openai:llama3.2", ref)
	m = contextwin.New(contextwin.Options{Models: models{f}, SummaryModel: "openai:gpt-4.1-nano"})
	_, _, ref, _ = m.SummaryModel("anthropic:claude-opus-4-5")
	require.Equal(t, "openai:gpt-4.1-nano", ref)
}

// meter numbers summarisation calls -1, -2, ... and refuses them when refuse is set.
type meter struct {
	next     int
	refuse   error
	reserved []int
	released []int
	spent    map[int]llm.Usage
}

func (m *meter) Reserve(_ context.Context, _ llm.Model, _ llm.Request) (int, error) {
	if m.refuse != nil {
		return 0, m.refuse
	}
	m.next--
	m.reserved = append(m.reserved, m.next)
	return m.next, nil
}

func (m *meter) Release(_ context.Context, idx int) { m.released = append(m.released, idx) }

func (m *meter) Spent(_ context.Context, idx int, _ string, _ llm.Model, u llm.Usage) {
	if m.spent == nil {
		m.spent = map[int]llm.Usage{}
	}
	m.spent[idx] = u
}

func TestSummaryCallsAreReservedFirst(t *testing.T) {
	t.Parallel()
	t.Run("reserved", func(t *testing.T) {
		b := setup(t, 28_000)
		m := &meter{}
		w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: history(300), Meter: m})
		require.NoError(t, err)
		require.False(t, w.Applied.Fallback)
		require.Equal(t, []int{-1}, m.reserved)
		require.Empty(t, m.released)
		require.Equal(t, []contextwin.Call{{Index: -1, Usage: llm.Usage{InputTokens: 500, OutputTokens: 20}}}, w.Applied.Calls)
	})
	t.Run("refused", func(t *testing.T) {
		b := setup(t, 28_000)
		m := &meter{refuse: errors.New("tenant budget exceeded")}
		w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: history(300), Meter: m})
		require.NoError(t, err)
		require.True(t, w.Applied.Fallback, "a refused summary falls back to truncation")
		require.Contains(t, w.Applied.Error, "tenant budget exceeded")
		require.Empty(t, w.Applied.Calls)
		require.Zero(t, b.fake.Calls(), "the refused call is not made")
	})
	t.Run("failed", func(t *testing.T) {
		b := setup(t, 28_000)
		b.fake.SetResponder(func(llm.Request) llmtest.Reply { return llmtest.Error(http.StatusInternalServerError, "down") })
		m := &meter{}
		w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: history(300), Meter: m})
		require.NoError(t, err)
		require.True(t, w.Applied.Fallback)
		require.Equal(t, []int{-1}, m.released, "a failed call gives its reservation back")
	})
	t.Run("cut after output", func(t *testing.T) {
		// The stream broke before the provider reported its usage: the call is metered with
		// the window (a fallback), as estimated from its request and the text it sent.
		b := setup(t, 28_000)
		b.fake.SetResponder(func(llm.Request) llmtest.Reply { return llmtest.Stream(llmtest.Text("SUMMARY so far"), llmtest.Cut()) })
		m := &meter{}
		w, err := b.m.Apply(context.Background(), contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: history(300), Meter: m})
		require.NoError(t, err)
		require.True(t, w.Applied.Fallback)
		require.Empty(t, m.released)
		require.Len(t, w.Applied.Calls, 1)
		require.Equal(t, -1, w.Applied.Calls[0].Index)
		require.Greater(t, w.Applied.Calls[0].Usage.InputTokens, int64(1000), "the request's estimated input")
		require.Positive(t, w.Applied.Calls[0].Usage.OutputTokens)
	})
	t.Run("cancelled", func(t *testing.T) {
		// The run was cancelled while the summariser answered: Apply fails, and the call
		// that was cut is spent (metered alone), not released.
		b := setup(t, 28_000)
		gate := make(chan struct{})
		t.Cleanup(func() { close(gate) })
		b.fake.SetResponder(func(llm.Request) llmtest.Reply { return llmtest.Stream(llmtest.Wait(gate), llmtest.Text("never")) })
		m := &meter{}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for b.fake.Calls() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, err := b.m.Apply(ctx, contextwin.Input{Conversation: conv("DEFAULT"), Model: b.model, History: history(300), Meter: m})
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, m.released)
		require.Len(t, m.spent, 1)
		require.Greater(t, m.spent[-1].InputTokens, int64(1000), "the request's estimated input")
	})
}
