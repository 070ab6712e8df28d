package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/agentry/agentry/internal/usage"
)

// defaultSystemPrompt is prepended to every conversation's own system prompt.
const defaultSystemPrompt = "You are agentry, a capable assistant. You can use the tools offered to read and change the files of the user's project workspace. Be concise and accurate."

// react makes the next model call (REACT) and stores its reply: its tool calls PENDING for the
// next step, or, when the model stopped on its own, with the run's end. A provider's
// context-length refusal compacts the context and calls once more; a stream that failed after
// output reached subscribers keeps the partial reply and ends the run.
func (a *attempt) react(ctx context.Context, p llm.Provider, model llm.Model, st state, calls int) (result, bool) {
	reflecting := st.run.MustReflect
	req, _, err := a.request(ctx, model, st, reflecting, false)
	if err != nil {
		return a.fromError(ctx, err), true
	}
	resp, err := a.call(ctx, p, req, calls)
	if contextTooLong(err) {
		// RECOVERABLE: compact the context, then retry once within this attempt (when there
		// was anything to compact; else the error goes to the next attempt's prompt).
		if creq, compacted, cerr := a.request(ctx, model, st, reflecting, true); cerr != nil {
			err = cerr
		} else if compacted {
			resp, err = a.call(ctx, p, creq, calls)
		}
	}
	if err != nil {
		return a.callFailed(ctx, p, model, resp, calls, err), true
	}
	if reflecting {
		resp.Blocks = textOnly(resp.Blocks) // no tools during a reflection turn
	}
	if !reflecting && (len(resp.ToolCalls()) == 0 || !a.conv.Agentic) {
		// TERMINATE: the model stopped on its own. The reply and the run's end are stored
		// in one transaction, and published in one message.
		o := run.Outcome{Status: run.StatusCompleted, TerminationReason: ReasonCompleted}
		if err := a.persistReplyAndFinish(ctx, p, model, resp, calls, o); err != nil {
			return a.fromError(ctx, err), true
		}
		return result{outcome: o, finished: true}, true
	}
	if err := a.persistReply(ctx, p, model, resp, calls, false); err != nil {
		return a.fromError(ctx, err), true
	}
	if reflecting {
		if err := a.endReflection(ctx, st, llm.Message{Blocks: resp.Blocks}.Text()); err != nil {
			return a.fromError(ctx, err), true
		}
	}
	return result{}, false
}

// callFailed is how a failed model call (err) ends the attempt: a reply cut after output reached
// subscribers is kept and ends the run FAILED stream_failed; otherwise the error decides (a
// partial reply of a call cut by a cancel, a timeout or a shutdown is kept for the record).
func (a *attempt) callFailed(ctx context.Context, p llm.Provider, model llm.Model, resp llm.Response, calls int, err error) result {
	var le *llm.Error
	if errors.As(err, &le) && le.Emitted && len(resp.Blocks) > 0 && ctx.Err() == nil {
		// Output already reached subscribers: keep it and end cleanly instead of retrying.
		if perr := a.persistReply(ctx, p, model, resp, calls, true); perr != nil {
			return a.fromError(ctx, perr)
		}
		return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(le.Class), Error: "model stream failed after partial output: " + le.Error(), TerminationReason: ReasonStreamFailed})
	}
	switch {
	case ctx.Err() != nil && len(resp.Blocks) > 0:
		_ = a.persistReply(context.WithoutCancel(ctx), p, model, resp, calls, true)
	case ctx.Err() != nil && resp.Usage != (llm.Usage{}):
		// Cut before any output: nothing to keep but the call's usage.
		a.meterAlone(context.WithoutCancel(ctx), p, model, resp, calls)
	}
	return a.fromError(ctx, err)
}

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
	if err != nil && resp.Usage == (llm.Usage{}) && (len(resp.Blocks) > 0 || ctx.Err() != nil) {
		// A stream cut before the provider reported its usage (OpenAI's comes at the end): after
		// output (a cancel, a timeout, a shutdown, a provider's failure), or by this side before
		// any (the provider had the request). The call is metered as estimated from what it sent
		// and what came back, never as free.
		resp.Usage = usage.EstimateCut(req, resp.Blocks)
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
	// The reply takes the conversation's next position, and ending the run hands the
	// conversation to its next queued run: InFenceConversation locks it before the lease, the
	// order of every run's end and of an interrupting sendMessage (the conversation, then its
	// active run). A reply is the record of a call already made, so it is stored even once the
	// run's cancel was requested (a call the cancel cut keeps the text its subscribers saw);
	// what would be new work after the cancel (a step's tools) is refused (InFenceStep).
	err := a.e.runs.InFenceConversation(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
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
		metered, settle, err := a.meter(ctx, tx, p, model, resp, callIndex)
		if err != nil {
			return err
		}
		news = append(news, metered...)
		if _, err = a.e.pub.Append(ctx, tx, a.lease.Scope(), news...); err != nil {
			return err
		}
		if end != nil {
			if _, err := a.e.runs.FinishTx(ctx, tx, a.lease, *end); err != nil {
				return err
			}
		}
		return settle()
	})
	if err == nil {
		a.tail = nil // published with the commit
	}
	if errors.Is(err, run.ErrFenced) {
		// The reply is not the run's any more (the run ended, a cancel among the ways, or moved
		// on to another attempt), but the call's tokens were spent all the same.
		a.meterAlone(ctx, p, model, resp, callIndex)
	}
	return err
}

// meterAlone records call callIndex's usage on the run and settles it against the budgets in a
// transaction of its own, for a call whose reply the run does not take (so that a cancel cannot
// make a call free). No event says so: the run's stream may have ended.
func (a *attempt) meterAlone(ctx context.Context, p llm.Provider, model llm.Model, resp llm.Response, callIndex int) {
	err := a.e.db.InTx(ctx, a.lease.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, settle, err := a.meter(ctx, tx, p, model, resp, callIndex)
		if err != nil {
			return err
		}
		return settle()
	})
	if err != nil {
		a.log.WarnContext(ctx, "meter a call whose reply the run did not take", slog.Int("call_index", callIndex), slog.Any("error", err))
		a.release(ctx, callIndex)
	}
}

// meter records call callIndex's usage (once: a stored record is kept) on the run in tx and
// returns its usage.recorded event and the settlement against the budgets, which the caller
// makes the transaction's last statement: it locks the run's stripe of the tenant's budgets,
// which other model calls of the tenant may need, so the locks are held only until the commit.
func (a *attempt) meter(ctx context.Context, tx *db.Tx, p llm.Provider, model llm.Model, resp llm.Response, callIndex int) ([]events.New, func() error, error) {
	r, idx := a.lease.Run, int32(callIndex)
	none := func() error { return nil }
	rec, err := tx.Q.UsageRecordInsert(ctx, dbsqlc.UsageRecordInsertParams{
		TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, UserID: r.UserID, RunKind: r.Kind, CallIndex: idx,
		Provider: p.Name(), Model: model.ID, InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
		CachedTokens: resp.Usage.CachedTokens, CostMicros: model.Cost(resp.Usage),
	})
	if db.IsNoRows(err) {
		return nil, none, nil
	}
	if err != nil {
		return nil, none, fmt.Errorf("meter usage: %w", err)
	}
	if err := tx.Q.RunAddUsage(ctx, dbsqlc.RunAddUsageParams{
		TenantID: r.TenantID, ID: r.ID, Attempt: a.lease.Attempt, InputTokens: rec.InputTokens,
		OutputTokens: rec.OutputTokens, CostMicros: rec.CostMicros, LlmCalls: idx + 1, Turns: idx + 1,
	}); err != nil {
		return nil, none, err
	}
	tx.AfterCommit(func() {
		a.e.metrics.Metered(rec.Provider, rec.Model, rec.InputTokens, rec.OutputTokens, rec.CachedTokens, rec.CostMicros)
	})
	news := []events.New{{Type: events.UsageRecorded, Data: map[string]any{
		"callIndex": callIndex, "provider": p.Name(), "model": model.ID, "inputTokens": rec.InputTokens,
		"outputTokens": rec.OutputTokens, "cachedTokens": rec.CachedTokens, "costMicros": rec.CostMicros,
	}}}
	return news, func() error { return a.settle(ctx, tx, callIndex, resp.Usage, rec.CostMicros) }, nil
}
