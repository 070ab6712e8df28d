package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// defaultSystemPrompt is prepended to every conversation's own system prompt.
const defaultSystemPrompt = "You are agentry, a capable assistant. You can use the tools offered to read and change the files of the user's project workspace. Be concise and accurate."

// attempt is one attempt at a run: one River job attempt working the RVR-B loop under the
// run's lease, until the run ends, is parked, or the attempt fails.
type attempt struct {
	e      *Executor
	lease  run.Lease
	log    *slog.Logger
	job    Attempt
	set    settings.Settings
	conv   dbsqlc.Conversation
	limits Limits
	// scoped replaces the executor's tools for this run when its kind's hooks scope them
	// (ToolScope); nil: the executor's. tools() narrows either by the run's AllowTool.
	scoped Tools
	// earlier holds the run's tool failures so far (the classifier looks for repeats).
	earlier []Failure
	// built is the context builder's system-prompt text for this attempt (nil until built).
	built *string
	// first is the state read with the lease (loadFirst), for the first load; nil after.
	first *state
	// pre is the first call's budget reservation, made in the transaction that acquired the
	// run (loadFirst); the call it was made for uses it, else it is released. nil after.
	pre *preReserved
	// tail is the last token delta of the latest reply, not published yet: it goes out with
	// the transaction that stores the reply (persistReply), else with the next call or at the
	// end of the attempt (flushTail).
	tail *events.Event
}

// result is how an attempt ended: an outcome to record, a retry, or suspended (the run is
// parked waiting for a person and its job simply ends).
type result struct {
	outcome   run.Outcome
	retry     *Retry
	suspended bool
	// finished is set when the outcome was recorded already (with the last reply).
	finished bool
}

func done(o run.Outcome) result { return result{outcome: o} }

// work runs the RVR-B loop: REACT (model call) -> VALIDATE (tool calls) -> REFLECT (classify
// failures) -> BACKTRACK when needed -> TERMINATE? (the adaptive terminator), until the run ends,
// is suspended, or the attempt fails.
func (a *attempt) work(ctx context.Context) result {
	defer a.flushTail(context.WithoutCancel(ctx))
	defer a.releaseUnused(ctx)
	r := a.lease.Run
	var err error
	// a.set and a.conv were read with the lease (loadFirst).
	a.limits = Limits{MaxTurns: MaxChatTurns}
	if a.e.MaxTurns > 0 {
		a.limits.MaxTurns = a.e.MaxTurns
	}
	if h := a.e.hooks[r.Kind]; h != nil {
		err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
			var err error
			if a.limits, err = h.Limits(ctx, tx, r); err != nil {
				return err
			}
			if sc, ok := h.(ToolScope); ok {
				if a.scoped, err = sc.Tools(ctx, tx, r, a.e.tools); err != nil {
					return err
				}
			}
			return h.Started(ctx, tx, r)
		})
		if err != nil {
			return a.fromError(ctx, err)
		}
	}
	provider, model, err := a.e.models.Resolve(a.conv.Model)
	if err != nil {
		return done(failed(llm.Terminal, err))
	}
	if r, stop := a.afterEscalation(ctx); stop {
		return r
	}
	// settings.timeoutSeconds bounds a chat-turn attempt; other kinds run under their own
	// wall-clock limit (measured from the run's first start), enforced by the terminator too.
	budget := time.Duration(a.set.TimeoutSeconds) * time.Second
	if r.Kind != run.KindChatTurn && a.limits.MaxDuration > 0 {
		budget = a.limits.MaxDuration
		if r.StartedAt != nil {
			budget -= a.e.clock().Sub(*r.StartedAt)
		}
		budget = max(budget, time.Second)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, budget, errTimeout)
	defer cancel()
	term := AdaptiveTerminator{Limits: a.limits, MaxTokens: a.set.MaxTokensPerTask, Now: a.e.now}

	for {
		if o, ok := a.stopped(ctx); ok {
			return done(o)
		}
		st, err := a.load(ctx)
		if err != nil {
			return a.fromError(ctx, err)
		}
		if st.run.CancelRequested {
			// Cancelled (maybe with an ancestor) while River's cancel is on its way: no model call
			// starts after the cancel committed.
			return done(run.Outcome{Status: run.StatusCancelled, Error: "cancelled", TerminationReason: "user_cancel"})
		}
		if st.run.StopRequested {
			return a.summarise(ctx, provider, model, st, ReasonUserStop, run.StatusCompleted)
		}
		if st.run.PauseRequested {
			return a.suspend(ctx, run.StatusPaused, events.New{Type: events.ExecutionPaused, Data: map[string]any{"reason": "paused by the user"}})
		}
		// VALIDATE: tool calls stored but not executed yet (this step's, or an earlier attempt's).
		if pending := pendingCalls(st.calls); len(pending) > 0 {
			res, stop := a.validate(ctx, pending)
			if stop != nil {
				return *stop
			}
			// REFLECT on the step's failures.
			if len(res.failures) > 0 {
				if r, stop := a.reflect(ctx, provider, model, st, res); stop {
					return r
				}
			}
			continue
		}
		// An earlier attempt may have stored a reply and died before acting on it.
		if last, ok := a.lastReply(st.hist); ok && len(toolUses(last)) == 0 {
			if !st.run.MustReflect {
				// The model had stopped on its own: that attempt only missed recording the end.
				return done(run.Outcome{Status: run.StatusCompleted, TerminationReason: ReasonCompleted})
			}
			// The reflection turn was stored; its breaker update was not.
			if err := a.endReflection(ctx, st, llm.Message{Blocks: last}.Text()); err != nil {
				return a.fromError(ctx, err)
			}
			continue
		}
		calls := max(int(st.run.LlmCalls), a.llmCalls(st.hist)) // backtracked turns count too
		confirmed := a.confirmedAt(ctx)
		if confirmed < 0 {
			return done(run.Outcome{Status: run.StatusCompleted, TerminationReason: ReasonUserStop, Data: map[string]any{"declined": "continue"}})
		}
		if sig, end := term.Check(st.run, calls, st.newer, confirmed); end {
			if sig.Confirm {
				return a.askToContinue(ctx, calls)
			}
			switch sig.Reason {
			case ReasonMaxTurns, ReasonUserIntent:
				return done(run.Outcome{Status: run.StatusCompleted, TerminationReason: sig.Reason})
			case ReasonFailures:
				return a.summarise(ctx, provider, model, st, sig.Reason, run.StatusFailed)
			case ReasonBudget:
				msg := "maxTokensPerTask used up"
				if a.limits.MaxTokens > 0 && st.run.InputTokens+st.run.OutputTokens >= a.limits.MaxTokens {
					msg = fmt.Sprintf("max tokens used up (%d of %d)", st.run.InputTokens+st.run.OutputTokens, a.limits.MaxTokens)
				}
				return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: sig.Reason, Error: msg})
			case ReasonMaxDuration:
				if a.limits.TimesOut {
					return done(run.Outcome{Status: run.StatusTimedOut, FailureClass: string(llm.Terminal), TerminationReason: "timeout", Error: "timed out: the run's time limit passed"})
				}
				return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: sig.Reason, Error: "stopped: " + sig.Reason})
			default:
				return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: sig.Reason, Error: "stopped: " + sig.Reason})
			}
		}
		// REACT.
		reflecting := st.run.MustReflect
		req, _, err := a.request(ctx, model, st, reflecting, false)
		if err != nil {
			return a.fromError(ctx, err)
		}
		resp, err := a.call(ctx, provider, req, calls)
		if contextTooLong(err) {
			// RECOVERABLE: compact the context, then retry once within this attempt (when there
			// was anything to compact; else the error goes to the next attempt's prompt).
			if creq, compacted, cerr := a.request(ctx, model, st, reflecting, true); cerr != nil {
				err = cerr
			} else if compacted {
				resp, err = a.call(ctx, provider, creq, calls)
			}
		}
		if err != nil {
			var le *llm.Error
			if errors.As(err, &le) && le.Emitted && len(resp.Blocks) > 0 && ctx.Err() == nil {
				// Output already reached subscribers: keep it and end cleanly instead of retrying.
				if perr := a.persistReply(ctx, provider, model, resp, calls, true); perr != nil {
					return a.fromError(ctx, perr)
				}
				return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(le.Class), Error: "model stream failed after partial output: " + le.Error(), TerminationReason: "stream_failed"})
			}
			if ctx.Err() != nil && len(resp.Blocks) > 0 {
				_ = a.persistReply(context.WithoutCancel(ctx), provider, model, resp, calls, true)
			}
			return a.fromError(ctx, err)
		}
		if reflecting {
			resp.Blocks = textOnly(resp.Blocks) // no tools during a reflection turn
		}
		if !reflecting && (len(resp.ToolCalls()) == 0 || !a.conv.Agentic) {
			// TERMINATE: the model stopped on its own. The reply and the run's end are stored
			// in one transaction, and published in one message.
			o := run.Outcome{Status: run.StatusCompleted, TerminationReason: ReasonCompleted}
			if err := a.persistReplyAndFinish(ctx, provider, model, resp, calls, o); err != nil {
				return a.fromError(ctx, err)
			}
			return result{outcome: o, finished: true}
		}
		if err := a.persistReply(ctx, provider, model, resp, calls, false); err != nil {
			return a.fromError(ctx, err)
		}
		if reflecting {
			if err := a.endReflection(ctx, st, llm.Message{Blocks: resp.Blocks}.Text()); err != nil {
				return a.fromError(ctx, err)
			}
			continue
		}
		// Tool calls are stored PENDING: the next step runs them (VALIDATE).
	}
}

// afterEscalation applies the user's answer to an escalation the run was parked for: a refusal
// ends the run; an approval's note goes into the conversation as the user's guidance (once).
func (a *attempt) afterEscalation(ctx context.Context) (result, bool) {
	// An escalation is asked from inside an attempt and answered before a later one (a resumed
	// run is acquired again, which bumps its attempt): the first attempt has none to apply and
	// skips the lookup, a transaction per chat turn (agentry bench, COUNTERS).
	if a.e.approvals == nil || a.lease.Attempt <= 1 {
		return result{}, false
	}
	r := a.lease.Run
	var state ApprovalState
	var note string
	err := a.e.db.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		state, note, _, err = a.e.approvals.Latest(ctx, tx, r.TenantID, r.ID, "escalation")
		return err
	})
	if err != nil {
		return a.fromError(ctx, err), true
	}
	switch state {
	case ApprovalRejected, ApprovalExpired:
		return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: ReasonEscalated,
			Error: "the user declined to let the run go on"}), true
	case ApprovalApproved:
		guidance := "Guidance from the user: " + note
		if strings.TrimSpace(note) == "" {
			guidance = "The user approved going on."
		}
		st, err := a.load(ctx)
		if err != nil {
			return a.fromError(ctx, err), true
		}
		for _, m := range st.hist {
			if m.Role == "USER" && m.Content == guidance {
				return result{}, false
			}
		}
		err = a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
			if _, err := a.insertMessage(ctx, tx, "USER", []llm.Block{{Type: llm.BlockText, Text: guidance}}, nil); err != nil {
				return err
			}
			return tx.Q.RunSetBreaker(ctx, dbsqlc.RunSetBreakerParams{TenantID: r.TenantID, ID: r.ID, Attempt: a.lease.Attempt,
				ConsecutiveFailures: 0, Backtracks: st.run.Backtracks, MustReflect: false})
		})
		if err != nil {
			return a.fromError(ctx, err), true
		}
	}
	return result{}, false
}

const reflectInstruction = "Several tool calls in a row have failed. Before calling any tool again, explain briefly what is going wrong and what you will do differently. Do not call tools in this reply."

func (a *attempt) systemPrompt(r dbsqlc.Run) string {
	p := systemPrompt(a.conv) + "\n\n" + styleInstruction(a.set)
	if r.FailureClass != nil && *r.FailureClass == string(llm.Recoverable) && r.Error != nil {
		p += "\n\nThe previous attempt at this step failed with this error; take it into account: " + truncate(*r.Error, 2000)
	}
	return p
}

// maxTokens is the output cap of the next call: the model's, the settings' per-task budget
// still left, whichever is lower.
func (a *attempt) maxTokens(r dbsqlc.Run, m llm.Model) int {
	left := int64(a.set.MaxTokensPerTask) - r.OutputTokens
	n := int64(m.MaxOutput)
	if n <= 0 || left < n {
		n = left
	}
	return int(max(n, 256))
}

// endReflection closes a reflection turn: the breaker's first level resets and a note follows
// the reflection, so the reply is never mistaken for the model stopping.
func (a *attempt) endReflection(ctx context.Context, st state, reflection string) error {
	r := a.lease.Run
	return a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		if err := tx.Q.RunSetBreaker(ctx, dbsqlc.RunSetBreakerParams{TenantID: r.TenantID, ID: r.ID, Attempt: a.lease.Attempt,
			ConsecutiveFailures: st.run.ConsecutiveFailures, Backtracks: st.run.Backtracks, MustReflect: false}); err != nil {
			return err
		}
		if _, err := a.insertMessage(ctx, tx, "SYSTEM", []llm.Block{{Type: llm.BlockText, Text: "Reflection noted (agentry): tools are available again."}}, nil); err != nil {
			return err
		}
		_, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), events.New{Type: events.ExecutionReflected, Data: map[string]any{"reflection": truncate(reflection, 2000)}})
		return err
	})
}

// lastReply returns the blocks of the newest message of the conversation when it is a model
// reply of this run (nothing has followed it yet).
func (a *attempt) lastReply(hist []dbsqlc.Message) ([]llm.Block, bool) {
	if len(hist) == 0 {
		return nil, false
	}
	m := hist[len(hist)-1]
	if m.Role != "ASSISTANT" || !m.RunID.Valid || m.RunID.UUID != a.lease.Run.ID {
		return nil, false
	}
	var blocks []llm.Block
	if err := json.Unmarshal(m.Parts, &blocks); err != nil {
		return nil, false
	}
	return blocks, true
}

// llmCalls is the number of model replies this run has stored: the next call's index.
func (a *attempt) llmCalls(hist []dbsqlc.Message) int {
	n := 0
	for _, m := range hist {
		if m.RunID.Valid && m.RunID.UUID == a.lease.Run.ID && m.LlmCallIndex != nil {
			n = max(n, int(*m.LlmCallIndex)+1)
		}
	}
	return n
}

func pendingCalls(calls []dbsqlc.ToolCall) []dbsqlc.ToolCall {
	var out []dbsqlc.ToolCall
	for _, c := range calls {
		if c.Status == run.ToolCallPending || c.Status == run.ToolCallRunning {
			out = append(out, c)
		}
	}
	return out
}

// call streams one model reply, publishing coalesced deltas as they come.
func (a *attempt) call(ctx context.Context, p llm.Provider, req llm.Request, callIndex int) (llm.Response, error) {
	a.flushTail(ctx)
	held, err := a.reserve(ctx, p, req, callIndex)
	if err != nil {
		return llm.Response{}, err
	}
	start := time.Now()
	ctx, span := a.e.tracer.Start(ctx, "llm.call", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("llm.provider", p.Name()), attribute.String("llm.model", req.Model), attribute.Int("llm.call_index", callIndex)))
	defer span.End()
	stream, err := p.Stream(ctx, req)
	if err != nil {
		a.e.metrics.ModelCall(p.Name(), req.Model, outcomeOf(err))
		endCall(span, err)
		if held {
			a.release(ctx, callIndex)
		}
		return llm.Response{}, err
	}
	co := newCoalescer(a.e.pub, a.lease.Scope(), callIndex)
	first := true
	resp, err := llm.Collect(stream, func(ev llm.Event) {
		if first && (ev.Type == llm.EventTextDelta || ev.Type == llm.EventToolCallStart) {
			first = false
			ttft := time.Since(start)
			a.e.metrics.FirstToken(p.Name(), req.Model, ttft)
			span.SetAttributes(attribute.Float64("llm.time_to_first_token_ms", float64(ttft.Microseconds())/1000))
		}
		if ev.Type == llm.EventTextDelta {
			co.add(ctx, ev.Text)
		}
	})
	a.e.metrics.ModelCall(p.Name(), req.Model, outcomeOf(err))
	span.SetAttributes(attribute.Int64("llm.input_tokens", resp.Usage.InputTokens), attribute.Int64("llm.output_tokens", resp.Usage.OutputTokens),
		attribute.Int64("llm.cached_tokens", resp.Usage.CachedTokens))
	endCall(span, err)
	if ev, ok := co.take(); ok {
		a.tail = &ev
	}
	if err != nil && held {
		a.release(ctx, callIndex) // a partial reply that is kept still settles its usage
	}
	return resp, err
}

// endCall records a model call's failure class on its span.
func endCall(span trace.Span, err error) {
	if err == nil {
		return
	}
	class := string(llm.Classify(err).Class)
	span.SetAttributes(attribute.String("llm.failure_class", class))
	span.SetStatus(codes.Error, class)
}

// outcomeOf is a model call's outcome label: ok, or the class of its failure.
func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return string(llm.Classify(err).Class)
}

// flushTail publishes the last token delta of the latest reply if it has not gone out yet.
func (a *attempt) flushTail(ctx context.Context) {
	if a.tail != nil {
		a.e.pub.Publish(ctx, a.lease.Run.TenantID, *a.tail)
		a.tail = nil
	}
}

// persistReply stores the model's reply, its tool calls (PENDING), its usage record and their
// events in one fenced transaction.
func (a *attempt) persistReply(ctx context.Context, p llm.Provider, model llm.Model, resp llm.Response, callIndex int, partial bool) error {
	return a.persist(ctx, p, model, resp, callIndex, partial, nil)
}

// persistReplyAndFinish is persistReply for a reply that ends the run: the run's end (o) is
// recorded in the same transaction.
func (a *attempt) persistReplyAndFinish(ctx context.Context, p llm.Provider, model llm.Model, resp llm.Response, callIndex int, o run.Outcome) error {
	return a.persist(ctx, p, model, resp, callIndex, false, &o)
}

func (a *attempt) persist(ctx context.Context, p llm.Provider, model llm.Model, resp llm.Response, callIndex int, partial bool, end *run.Outcome) error {
	r := a.lease.Run
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		if end != nil && r.ConversationID.Valid {
			// Ending the run locks the conversation FOR UPDATE (to hand it to its next queued
			// run). Take that lock first: storing the reply locks the row more weakly, and
			// upgrading that lock later deadlocks with an interrupted run's end waiting for it.
			if _, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: r.TenantID, ID: r.ConversationID.UUID}); err != nil {
				return fmt.Errorf("lock conversation: %w", err)
			}
		}
		if a.tail != nil {
			// The reply's last delta goes out with its message.completed.
			a.e.pub.Stage(ctx, tx, r.TenantID, *a.tail)
		}
		blocks := resp.Blocks
		if partial {
			// A cut stream's tool calls are unfinished: keep only the text that was shown.
			blocks = textOnly(blocks)
		}
		text := llm.Message{Blocks: blocks}.Text()
		idx := int32(callIndex)
		msg, err := a.insertMessage(ctx, tx, "ASSISTANT", blocks, &idx)
		if err != nil {
			return fmt.Errorf("store reply: %w", err)
		}
		news := []events.New{{Type: events.MessageCompleted, Data: map[string]any{
			"messageId": msg.ID, "role": "ASSISTANT", "content": text, "callIndex": callIndex, "partial": partial,
			"stopReason": resp.StopReason, "toolCalls": len(toolUses(blocks)),
		}}}
		if !partial {
			for _, c := range toolUses(blocks) {
				risk := 0
				if tools := a.tools(); tools != nil {
					risk = tools.Risk(c.Name, c.Input)
				}
				if _, err := tx.Q.ToolCallInsert(ctx, dbsqlc.ToolCallInsertParams{
					TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, MessageID: msg.ID, CallID: c.ID,
					Turn: idx, Name: c.Name, Arguments: c.Input, Status: run.ToolCallPending, Risk: int32(risk),
				}); err != nil {
					return fmt.Errorf("store tool call: %w", err)
				}
			}
		}
		cost := model.Cost(resp.Usage)
		var settle *dbsqlc.UsageRecord
		rec, err := tx.Q.UsageRecordInsert(ctx, dbsqlc.UsageRecordInsertParams{
			TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, UserID: r.UserID, RunKind: r.Kind, CallIndex: idx,
			Provider: p.Name(), Model: model.ID, InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
			CachedTokens: resp.Usage.CachedTokens, CostMicros: cost,
		})
		if err != nil && !db.IsNoRows(err) {
			return fmt.Errorf("meter usage: %w", err)
		}
		if err == nil {
			if err := tx.Q.RunAddUsage(ctx, dbsqlc.RunAddUsageParams{
				TenantID: r.TenantID, ID: r.ID, Attempt: a.lease.Attempt, InputTokens: rec.InputTokens,
				OutputTokens: rec.OutputTokens, CostMicros: rec.CostMicros, LlmCalls: idx + 1, Turns: idx + 1,
			}); err != nil {
				return err
			}
			settle = &rec
			tx.AfterCommit(func() {
				a.e.metrics.Metered(rec.Provider, rec.Model, rec.InputTokens, rec.OutputTokens, rec.CachedTokens, rec.CostMicros)
			})
			news = append(news, events.New{Type: events.UsageRecorded, Data: map[string]any{
				"callIndex": callIndex, "provider": p.Name(), "model": model.ID, "inputTokens": rec.InputTokens,
				"outputTokens": rec.OutputTokens, "cachedTokens": rec.CachedTokens, "costMicros": rec.CostMicros,
			}})
		}
		if _, err = a.e.pub.Append(ctx, tx, a.lease.Scope(), news...); err != nil {
			return err
		}
		if end != nil {
			if _, err := a.e.runs.FinishTx(ctx, tx, a.lease, *end); err != nil {
				return err
			}
		}
		if settle != nil {
			// The settlement locks the run's stripe of the tenant's budgets, which other model
			// calls of the tenant may need: it is the transaction's last statement, so the locks
			// are held only until the commit.
			return a.settle(ctx, tx, callIndex, resp.Usage, settle.CostMicros)
		}
		return nil
	})
	if err == nil {
		a.tail = nil // published with the commit
	}
	return err
}

func systemPrompt(conv dbsqlc.Conversation) string {
	if strings.TrimSpace(conv.SystemPrompt) == "" {
		return defaultSystemPrompt
	}
	return defaultSystemPrompt + "\n\n" + conv.SystemPrompt
}

// toLLM turns stored messages into the model's messages: tool results become user turns, and
// consecutive messages of one role merge (providers want alternating roles).
func toLLM(hist []dbsqlc.Message) []llm.Message {
	var out []llm.Message
	for _, m := range hist {
		var blocks []llm.Block
		if err := json.Unmarshal(m.Parts, &blocks); err != nil || len(blocks) == 0 {
			blocks = []llm.Block{{Type: llm.BlockText, Text: m.Content}}
		}
		role := llm.RoleUser
		switch m.Role {
		case "ASSISTANT":
			role = llm.RoleAssistant
		case "SYSTEM":
			// agentry's own notes (reflection summaries) reach the model as user-turn text.
			blocks = []llm.Block{{Type: llm.BlockText, Text: m.Content}}
		}
		if len(out) > 0 && out[len(out)-1].Role == role {
			out[len(out)-1].Blocks = append(out[len(out)-1].Blocks, blocks...)
			continue
		}
		out = append(out, llm.Message{Role: role, Blocks: blocks})
	}
	return closeToolUses(out)
}

func toolUses(blocks []llm.Block) []llm.Block {
	return llm.Response{Blocks: blocks}.ToolCalls()
}

func textOnly(blocks []llm.Block) []llm.Block {
	var out []llm.Block
	for _, b := range blocks {
		if b.Type == llm.BlockText {
			out = append(out, b)
		}
	}
	return out
}

// closeToolUses gives every tool_use a tool_result right after it: a call that never got one
// (its run was cancelled or failed first) is answered as not run, since providers refuse a
// conversation with an unanswered call.
func closeToolUses(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for i := 0; i < len(msgs); i++ {
		out = append(out, msgs[i])
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		var open []string
		for _, b := range msgs[i].Blocks {
			if b.Type == llm.BlockToolUse {
				open = append(open, b.ID)
			}
		}
		if len(open) == 0 {
			continue
		}
		answered := map[string]bool{}
		if i+1 < len(msgs) && msgs[i+1].Role == llm.RoleUser {
			for _, b := range msgs[i+1].Blocks {
				if b.Type == llm.BlockToolResult {
					answered[b.ToolUseID] = true
				}
			}
		}
		var missing []llm.Block
		for _, id := range open {
			if !answered[id] {
				missing = append(missing, llm.Block{Type: llm.BlockToolResult, ToolUseID: id, IsError: true, Content: "not run: the run ended before this call was executed"})
			}
		}
		if len(missing) == 0 {
			continue
		}
		if i+1 < len(msgs) && msgs[i+1].Role == llm.RoleUser {
			next := msgs[i+1]
			next.Blocks = append(missing, next.Blocks...)
			out = append(out, next)
			i++
		} else {
			out = append(out, llm.Message{Role: llm.RoleUser, Blocks: missing})
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func failed(c llm.Class, err error) run.Outcome {
	return run.Outcome{Status: run.StatusFailed, FailureClass: string(c), Error: err.Error(), TerminationReason: "error"}
}
