// Package contextwin is the context window manager and the context builder (ARCHITECTURE.md:
// the executor).
//
// The manager (Manager.Apply) fits a conversation's history into the model's context: it
// estimates tokens (about 4 characters per token, 1,000 per image; a stored message's estimate
// is its token_estimate column, written with it: Tokens), computes the budget (the
// model's context limit minus the system prompt and tools minus a 20,000-token safety margin;
// 150,000 for a model the catalogue does not know), and, when the strategy asks for it, keeps
// the newest messages verbatim (at least KeepMessages, never separating a tool call from its
// results) and folds the older ones into a running summary written by a cheap model with a
// prompt of the conversation's mode. The summary travels in the system prompt, is stored on the
// conversation with the last message it covers (summarized_through) and is extended
// incrementally on later turns rather than recomputed; the executor reads only the messages
// after it, so a turn's work is bounded by its window, not by the conversation's length. When the summariser fails or times out,
// the older messages are sent truncated to FallbackChars characters each instead, and the
// stored summary is left as it was (the next turn tries again). Every summarisation call is
// reserved against the run's budgets before it is made (Input.Meter: the executor's
// reservation path) and a refusal is a failure like any other: the window falls back. Persist
// stores the outcome, meters each call that answered and gives the context.window.applied
// event; the executor settles the calls' reservations in the same transaction.
//
// Strategies (settings.contextStrategy):
//
//	PRESERVE   summarise only when the history exceeds the budget, then keep about half the
//	           budget verbatim (so the next turns fit again without summarising)
//	COMPACT    summarise as soon as the history exceeds half the budget, keep about a quarter
//	SUMMARIZE  keep only the last KeepMessages verbatim: summarise as soon as 2*KeepMessages
//	           messages are not summarised yet (so the summariser runs every other turn, not on
//	           every one)
//
// A provider's context-length error makes the executor call Apply again with Force: everything
// but the last KeepMessages is summarised.
//
// The builder (Build) assembles the rest of the context: the mode's instruction, the project
// (name, description, open tasks) and the user's memories relevant to the new message.
package contextwin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/usage"
)

// Limits of the window.
const (
	// SafetyMargin is left free in every model's context (the reply, estimate errors).
	SafetyMargin = 20_000
	// UnknownModelBudget is the budget for a model the catalogue does not know.
	UnknownModelBudget = 150_000
	// MinBudget is the smallest budget ever used (a tiny or mis-set context limit).
	MinBudget = 1_000
	// KeepMessages is the fewest newest messages always sent verbatim (two full turns).
	KeepMessages = 4
	// FallbackChars is what each older message is cut to when the summariser fails.
	FallbackChars = 150
	// DefaultSummaryTimeout bounds one summarisation call.
	DefaultSummaryTimeout = 60 * time.Second

	minSummaryTokens = 256
	maxSummaryTokens = 1024
	// maxChunkTokens bounds one summarisation call's input; longer histories are folded in
	// chunk by chunk.
	maxChunkTokens = 100_000
	// transcriptChars bounds each message in the summariser's transcript.
	transcriptChars = 4_000
)

// Strategies (settings.contextStrategy).
const (
	StrategyPreserve  = "PRESERVE"
	StrategyCompact   = "COMPACT"
	StrategySummarize = "SUMMARIZE"
)

// Why a window summarised (the event's reason).
const (
	ReasonOverBudget    = "over_budget"
	ReasonCompact       = "compact"
	ReasonSummarize     = "summarize"
	ReasonContextLength = "context_length"
)

// Meter reserves each summarisation call against the budgets of the run it serves before the
// call is made, through the same reservation path as the run's own model calls (the executor
// implements it). The call is settled when Persist stores its usage record.
type Meter interface {
	// Reserve holds the worst case of req on model and returns the call's index (negative:
	// the key of its reservation and usage record). An error refuses the call (a
	// BUDGET_EXCEEDED apperr when a budget has no room): the window falls back to truncation.
	Reserve(ctx context.Context, model llm.Model, req llm.Request) (callIndex int, err error)
	// Release gives back the reservation of a call whose answer will not be stored and that
	// consumed nothing (it failed before the provider took it).
	Release(ctx context.Context, callIndex int)
	// Spent meters, on its own, a call that consumed u but whose answer will not be stored (the
	// run was cancelled or timed out while the summary was made), and settles its reservation:
	// a cancel does not make a call free.
	Spent(ctx context.Context, callIndex int, provider string, model llm.Model, u llm.Usage)
}

// Models resolves "provider:model" references (the llm.Registry).
type Models interface {
	Resolve(ref string) (llm.Provider, llm.Model, error)
}

// Options configure a Manager.
type Options struct {
	// Models resolves the summary model.
	Models Models
	// SummaryModel is AGENTRY_SUMMARY_MODEL ("provider:model"); empty means a small model of
	// the conversation's provider (see Manager.SummaryModel).
	SummaryModel string
	// SummaryTimeout bounds one summarisation call (DefaultSummaryTimeout when 0).
	SummaryTimeout time.Duration
	// Log receives warnings (a summary model that cannot be resolved).
	Log *slog.Logger
}

// Manager is the context window manager. It holds no per-conversation state (summaries live
// in Postgres) and is safe for concurrent use.
type Manager struct {
	models  Models
	summary string
	log     *slog.Logger

	mu      sync.RWMutex
	limits  map[string]int
	timeout time.Duration
}

// New returns a manager.
func New(o Options) *Manager {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{models: o.Models, summary: o.SummaryModel, log: log, limits: map[string]int{}, timeout: o.SummaryTimeout}
	if m.timeout <= 0 {
		m.timeout = DefaultSummaryTimeout
	}
	return m
}

// SetContextTokens overrides the catalogue's context limit of a model ("provider:model"):
// models served with a smaller window than the catalogue says, and tests. 0 removes the
// override. Safe while the manager works (tests and the bench change it on a running process).
func (m *Manager) SetContextTokens(ref string, tokens int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tokens <= 0 {
		delete(m.limits, ref)
		return
	}
	m.limits[ref] = tokens
}

// SetSummaryTimeout changes the bound of one summarisation call. Safe while the manager works.
func (m *Manager) SetSummaryTimeout(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.timeout = d
}

func (m *Manager) summaryTimeout() time.Duration {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.timeout
}

// Budget is the token budget of a request's history (summary and messages) to model when the
// system prompt and tools take fixed tokens: the context limit minus fixed minus SafetyMargin,
// UnknownModelBudget for a model the catalogue does not know, never below MinBudget.
func (m *Manager) Budget(model llm.Model, fixed int) int {
	m.mu.RLock()
	limit, overridden := m.limits[model.Provider+":"+model.ID]
	m.mu.RUnlock()
	if !overridden {
		if !model.Known {
			return UnknownModelBudget
		}
		limit = model.ContextTokens
	}
	return max(limit-fixed-SafetyMargin, MinBudget)
}

// Input is one request's context, before the window is applied.
type Input struct {
	// Conversation gives the mode, the model reference and the stored summary.
	Conversation dbsqlc.Conversation
	// Strategy is the user's settings.contextStrategy (PRESERVE when empty).
	Strategy string
	// Model is the model the request goes to.
	Model llm.Model
	// System is the system prompt without the summary; Tools the tools offered.
	System string
	Tools  []llm.ToolSpec
	// History is what the model would see without a window, oldest first: the messages after
	// the stored summary (the executor reads no more), or the whole history (then the messages
	// up to the summary's last are left out here). Each message's stored token_estimate is
	// used (Tokens).
	History []dbsqlc.Message
	// Force compacts to the minimum: the provider refused the last request as too long.
	Force bool
	// Meter reserves every summarisation call before it is made (nil: calls are not reserved,
	// and Persist numbers them).
	Meter Meter
}

// Window is the context a request carries.
type Window struct {
	// Messages are the messages sent verbatim, oldest first (a short user-role note first when
	// the kept part starts with an assistant message).
	Messages []dbsqlc.Message
	// System is Input.System followed by the summary block (when there is a summary).
	System string
	// Summary is the summary (or the fallback's truncated messages) in System; "" when none.
	Summary string
	// Budget is the history's token budget.
	Budget int
	// Applied says what this window changed (a new summary, or the fallback); nil when the
	// history (and the stored summary, if any) fit as they were. Persist stores it.
	Applied *Applied
}

// Applied is what one application of the window did; the context.window.applied event says it.
type Applied struct {
	Strategy, Mode, Reason string
	Budget                 int
	// TokensBefore is the request's estimate without a window (system, tools, the history
	// given: the messages after the stored summary when the executor applies it); TokensAfter
	// with it.
	TokensBefore, TokensAfter int
	// MessagesSummarized were folded into the summary now (or truncated, with Fallback);
	// MessagesKept are sent verbatim.
	MessagesSummarized, MessagesKept int
	// Fallback is set when the summariser failed (Error says how) and the older messages were
	// truncated instead.
	Fallback bool
	Error    string
	// SummaryModel is the summariser ("provider:model").
	SummaryModel string
	// Summary is the conversation's new stored summary, covering messages up to Through
	// (empty when Fallback: the stored summary stays).
	Summary string
	Through uuid.UUID
	// Calls are the summarisation calls that answered (also with Fallback, when a later chunk
	// failed): each is metered and settled by its index. Usage is their sum, on Model of
	// Provider.
	Calls    []Call
	Usage    llm.Usage
	Model    llm.Model
	Provider string
}

// Call is one summarisation call that answered: its index (0 when no Meter numbered it) and
// what it used.
type Call struct {
	Index int
	Usage llm.Usage
}

// fitting is Apply's plan for an input: the window when nothing must be summarised, else what
// the summariser must fold.
type fitting struct {
	hist         []dbsqlc.Message
	toks         []int
	whole, fixed int
	budget       int
	strategy     string
	reason       string
	start, cut   int
	summary      string
	fits         bool
	w            Window
}

// Fit is Apply without side effects: the window and true when in's history fits as it is (or
// with the stored summary), false when Apply would call the summariser. The executor uses it
// to build a call's request inside the transaction that acquires the run.
func (m *Manager) Fit(in Input) (Window, bool) {
	f := m.plan(in)
	return f.w, f.fits
}

func (m *Manager) plan(in Input) fitting {
	hist := in.History
	toks := make([]int, len(hist))
	whole := 0
	for i, msg := range hist {
		toks[i] = Tokens(msg)
		whole += toks[i]
	}
	fixed := EstimateText(in.System) + EstimateTools(in.Tools)
	budget := m.Budget(in.Model, fixed)
	strategy := in.Strategy
	if strategy != StrategyCompact && strategy != StrategySummarize {
		strategy = StrategyPreserve
	}

	// The stored summary covers hist[:start]: the messages up to the one it was written
	// through, when the history holds it; else the history starts after it (the executor reads
	// only the messages after the summary).
	start, summary := 0, ""
	if c := in.Conversation; c.Summary != nil && *c.Summary != "" && c.SummarizedThrough.Valid {
		summary = *c.Summary
		for i, msg := range hist {
			if msg.ID == c.SummarizedThrough.UUID {
				start = i + 1
				break
			}
		}
	}
	current := EstimateText(summaryBlock(summary)) + sum(toks[start:])
	reason, target := plan(strategy, in.Force, budget, current, len(hist)-start)
	cut := start
	if reason != "" {
		cut = chooseCut(hist, toks, start, target)
	}
	f := fitting{hist: hist, toks: toks, whole: whole, fixed: fixed, budget: budget, strategy: strategy,
		reason: reason, start: start, cut: cut, summary: summary, fits: cut <= start}
	if f.fits {
		f.w = window(in.System, hist[start:], summary, budget)
	}
	return f
}

// Apply fits in's history into the budget as its strategy says, calling the summariser when
// older messages must be folded into the summary. It fails only when ctx ends.
func (m *Manager) Apply(ctx context.Context, in Input) (Window, error) {
	f := m.plan(in)
	if f.fits {
		return f.w, nil
	}
	hist, toks, whole, fixed, budget := f.hist, f.toks, f.whole, f.fixed, f.budget
	strategy, reason, start, cut, summary := f.strategy, f.reason, f.start, f.cut, f.summary

	allowance := min(max(budget/4, minSummaryTokens), maxSummaryTokens)
	a := &Applied{
		Strategy: strategy, Mode: in.Conversation.Mode, Reason: reason, Budget: budget,
		TokensBefore: fixed + whole, MessagesSummarized: cut - start,
	}
	res, err := m.summarise(ctx, in, summary, hist[start:cut], allowance)
	a.SummaryModel = res.ref
	a.Calls, a.Usage, a.Model, a.Provider = res.calls, res.usage, res.model, res.provider
	var w Window
	if err != nil {
		if ctx.Err() != nil {
			if in.Meter != nil {
				for _, c := range res.calls {
					if c.Usage == (llm.Usage{}) {
						in.Meter.Release(ctx, c.Index) // a provider that reports no usage
						continue
					}
					in.Meter.Spent(ctx, c.Index, res.provider, res.model, c.Usage)
				}
			}
			return Window{}, ctx.Err()
		}
		m.log.WarnContext(ctx, "context summary failed; truncating older messages instead",
			slog.String("conversation_id", in.Conversation.ID.String()), slog.Any("error", err))
		a.Fallback, a.Error = true, err.Error()
		room := max(budget-sum(toks[cut:]), allowance)
		w = window(in.System, hist[cut:], fallback(summary, hist[start:cut], room), budget)
	} else {
		a.Summary, a.Through = res.text, hist[cut-1].ID
		w = window(in.System, hist[cut:], res.text, budget)
	}
	a.MessagesKept = len(w.Messages)
	a.TokensAfter = EstimateText(w.System) + EstimateTools(in.Tools)
	for _, msg := range w.Messages {
		a.TokensAfter += Tokens(msg)
	}
	w.Applied = a
	return w, nil
}

// plan decides whether the history must be summarised now and how many tokens of messages to
// keep verbatim then (0: only KeepMessages).
func plan(strategy string, force bool, budget, current, unsummarised int) (reason string, keep int) {
	switch {
	case force:
		return ReasonContextLength, 0
	case strategy == StrategyCompact && current > budget/2:
		return ReasonCompact, budget / 4
	case strategy == StrategySummarize && (unsummarised >= 2*KeepMessages || current > budget):
		return ReasonSummarize, 0
	case current > budget:
		return ReasonOverBudget, budget / 2
	}
	return "", 0
}

// chooseCut walks back from the newest message and returns the index of the first message kept
// verbatim: at least KeepMessages are kept, more while they fit in keep tokens, and the kept
// part never starts with a tool result (its call is kept with it).
func chooseCut(hist []dbsqlc.Message, toks []int, start, keep int) int {
	k, kept := len(hist), 0
	for k > start {
		t := toks[k-1]
		if len(hist)-k >= KeepMessages && kept+t > keep {
			break
		}
		kept += t
		k--
	}
	for k > start && k < len(hist) && hist[k].Role == "TOOL" {
		k--
	}
	return k
}

// leadNote opens a kept part that starts with an assistant message: providers want the user
// to speak first.
const leadNote = "(The earlier part of this conversation is summarised in the system prompt.)"

func window(system string, kept []dbsqlc.Message, summary string, budget int) Window {
	for len(kept) > 0 && kept[0].Role == "TOOL" {
		kept = kept[1:] // a result whose call is not sent: providers refuse it
	}
	w := Window{Messages: kept, System: system, Summary: summary, Budget: budget}
	if summary != "" {
		w.System += "\n\n" + summaryBlock(summary)
		if len(kept) > 0 && kept[0].Role == "ASSISTANT" {
			w.Messages = append([]dbsqlc.Message{{Role: "USER", Content: leadNote}}, kept...)
		}
	}
	return w
}

// summaryBlock is how a summary appears in the system prompt.
func summaryBlock(summary string) string {
	if summary == "" {
		return ""
	}
	return "<conversation_summary>\nThe earlier part of this conversation, summarised (the messages that follow continue from it):\n" +
		summary + "\n</conversation_summary>"
}

type summarised struct {
	text     string
	calls    []Call
	usage    llm.Usage
	model    llm.Model
	provider string
	ref      string
}

// SummaryModel is the summariser of a conversation on model ref: AGENTRY_SUMMARY_MODEL when
// set and its provider is configured; else a small model of the conversation's provider
// (claude-haiku-4-5 for Anthropic, gpt-4o-mini for OpenAI, gemini-2.0-flash for Gemini behind
// an OpenAI-compatible URL) when the conversation's model is in the catalogue; else the
// conversation's own model (a local server may serve nothing else).
func (m *Manager) SummaryModel(ref string) (llm.Provider, llm.Model, string, error) {
	if m.models == nil {
		return nil, llm.Model{}, "", errors.New("no models configured")
	}
	if m.summary != "" {
		p, model, err := m.models.Resolve(m.summary)
		if err == nil {
			return p, model, m.summary, nil
		}
		m.log.Warn("AGENTRY_SUMMARY_MODEL cannot be used; using a small model of the conversation's provider", slog.Any("error", err))
	}
	provider, id, err := llm.ParseModelRef(ref)
	if err != nil {
		return nil, llm.Model{}, "", err
	}
	if llm.Lookup(provider, id).Known {
		switch {
		case provider == "anthropic":
			ref = "anthropic:claude-haiku-4-5"
		case provider == "openai" && strings.HasPrefix(id, "gemini"):
			ref = "openai:gemini-2.0-flash"
		case provider == "openai":
			ref = "openai:gpt-4o-mini"
		}
	}
	p, model, err := m.models.Resolve(ref)
	return p, model, ref, err
}

// summarise folds msgs into prev with the summary model, chunk by chunk when they do not fit
// one call. Each call is reserved with in.Meter first; on an error the calls that answered
// before it, and the failed one when it consumed something, are in the result (their usage is
// metered).
func (m *Manager) summarise(ctx context.Context, in Input, prev string, msgs []dbsqlc.Message, maxTokens int) (summarised, error) {
	var res summarised
	p, model, ref, err := m.SummaryModel(in.Conversation.Model)
	res.ref = ref
	if err != nil {
		return res, fmt.Errorf("summary model: %w", err)
	}
	res.model, res.provider = model, p.Name()
	system := SummaryPrompt(in.Conversation.Mode) + "\n\n" + fmt.Sprintf(
		"Write only the summary, as plain text of at most about %d words. Do not answer the user and do not continue the conversation.", maxTokens*3/4)
	room := min(m.Budget(model, EstimateText(system)+maxTokens), maxChunkTokens)
	lines := make([]string, len(msgs))
	for i, msg := range msgs {
		lines[i] = line(msg, transcriptChars)
	}
	for len(lines) > 0 {
		fit := max(room-EstimateText(prev), 2_000)
		n, used := 0, 0
		for n < len(lines) && (n == 0 || used+EstimateText(lines[n]) <= fit) {
			used += EstimateText(lines[n]) + 1
			n++
		}
		req := llm.Request{Model: model.ID, System: system, MaxTokens: maxTokens, Messages: []llm.Message{{
			Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: transcript(prev, lines[:n])}},
		}}}
		idx := 0
		if in.Meter != nil {
			if idx, err = in.Meter.Reserve(ctx, model, req); err != nil {
				return res, fmt.Errorf("summarise with %s: %w", ref, err)
			}
		}
		text, usage, err := m.call(ctx, p, req)
		if err != nil && usage == (llm.Usage{}) {
			if in.Meter != nil {
				in.Meter.Release(ctx, idx)
			}
			return res, fmt.Errorf("summarise with %s: %w", ref, err)
		}
		res.calls = append(res.calls, Call{Index: idx, Usage: usage})
		res.usage.InputTokens += usage.InputTokens
		res.usage.OutputTokens += usage.OutputTokens
		res.usage.CachedTokens += usage.CachedTokens
		if err != nil {
			return res, fmt.Errorf("summarise with %s: %w", ref, err)
		}
		prev = clip(text, maxTokens*CharsPerToken)
		lines = lines[n:]
	}
	res.text = prev
	return res, nil
}

// call makes one summarisation call and returns its text and usage. A stream cut before the
// provider reported its usage, after output or by this side (a cancel, the summary timeout),
// is metered as estimated, as the run's own calls are.
func (m *Manager) call(ctx context.Context, p llm.Provider, req llm.Request) (string, llm.Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, m.summaryTimeout())
	defer cancel()
	s, err := p.Stream(ctx, req)
	if err != nil {
		return "", llm.Usage{}, err
	}
	resp, err := llm.Collect(s, nil)
	if err != nil && resp.Usage == (llm.Usage{}) && (len(resp.Blocks) > 0 || ctx.Err() != nil) {
		resp.Usage = usage.EstimateCut(req, resp.Blocks)
	}
	if err != nil {
		return "", resp.Usage, err
	}
	text := strings.TrimSpace(llm.Message{Blocks: resp.Blocks}.Text())
	if text == "" {
		return "", resp.Usage, errors.New("the summariser answered nothing")
	}
	return text, resp.Usage, nil
}

func transcript(prev string, lines []string) string {
	var b strings.Builder
	if prev != "" {
		b.WriteString("The summary so far (extend it with the new messages below; keep what still matters):\n<summary>\n")
		b.WriteString(prev)
		b.WriteString("\n</summary>\n\nNew messages:\n")
	} else {
		b.WriteString("Messages to summarise:\n")
	}
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// line is one message in a transcript: its role and its content on one line, cut to n
// characters.
func line(m dbsqlc.Message, n int) string {
	var parts []string
	for _, b := range blocksOf(m) {
		switch b.Type {
		case llm.BlockText:
			parts = append(parts, b.Text)
		case llm.BlockToolUse:
			parts = append(parts, fmt.Sprintf("(calls %s with %s)", b.Name, string(b.Input)))
		case llm.BlockToolResult:
			if b.IsError {
				parts = append(parts, "(error) "+b.Content)
			} else {
				parts = append(parts, b.Content)
			}
		case llm.BlockImage:
			parts = append(parts, "(an image)")
		}
	}
	role := map[string]string{"USER": "user", "ASSISTANT": "assistant", "TOOL": "tool result", "SYSTEM": "note"}[m.Role]
	text := strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
	return "[" + role + "] " + clip(text, n)
}

// fallback is what stands in for a summary when the summariser failed: the stored summary (if
// any), then each newer older message cut to FallbackChars characters, the oldest left out when
// they do not fit in room tokens.
func fallback(prev string, msgs []dbsqlc.Message, room int) string {
	head := "The summariser was unavailable: the earlier messages follow, each cut to 150 characters."
	if prev != "" {
		head = "Summary of the oldest messages:\n" + prev + "\n\n" + head
	}
	left := room - EstimateText(head) - 20
	lines := make([]string, 0, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		l := line(msgs[i], FallbackChars)
		if left-EstimateText(l)-1 < 0 {
			break
		}
		left -= EstimateText(l) + 1
		lines = append(lines, l)
	}
	var b strings.Builder
	b.WriteString(head)
	if dropped := len(msgs) - len(lines); dropped > 0 {
		fmt.Fprintf(&b, "\n[%d earlier messages left out]", dropped)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		b.WriteString("\n" + lines[i])
	}
	return b.String()
}

// clip cuts s to n characters, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
