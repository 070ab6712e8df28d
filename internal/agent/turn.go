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

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// defaultSystemPrompt is prepended to every conversation's own system prompt.
const defaultSystemPrompt = "You are agentry, a capable assistant. You can use the tools offered to read and change the files of the user's project workspace. Be concise and accurate."

// turn is one attempt at a run.
type turn struct {
	e     *Executor
	lease run.Lease
	log   *slog.Logger
	at    Attempt
}

// work runs the chat loop and says how the attempt ended: an outcome, or a retry.
func (t *turn) work(ctx context.Context) (run.Outcome, *Retry) {
	r := t.lease.Run
	set, conv, err := t.e.loadSettings(ctx, r)
	if err != nil {
		return failed(llm.Transient, err), &Retry{Class: llm.Transient, Err: err}
	}
	provider, model, err := t.e.models.Resolve(conv.Model)
	if err != nil {
		return failed(llm.Terminal, err), nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, time.Duration(set.TimeoutSeconds)*time.Second, errTimeout)
	defer cancel()

	maxTurns := MaxChatTurns
	if t.e.MaxTurns > 0 {
		maxTurns = t.e.MaxTurns
	}
	for {
		if o, done := t.stopped(ctx, nil); done {
			return o, nil
		}
		hist, calls, err := t.load(ctx, conv)
		if err != nil {
			return t.fromError(ctx, err)
		}
		// Tool calls persisted by an earlier attempt but not executed yet run first.
		if pending := pendingCalls(calls); len(pending) > 0 {
			if err := t.runTools(ctx, conv, pending); err != nil {
				return t.fromError(ctx, err)
			}
			continue
		}
		callIndex := t.llmCalls(hist)
		if callIndex >= maxTurns {
			return run.Outcome{Status: run.StatusCompleted, TerminationReason: "max_turns"}, nil
		}
		req := llm.Request{Model: model.ID, System: systemPrompt(conv), Messages: toLLM(hist), MaxTokens: set.MaxTokensPerTask}
		if conv.Agentic && t.e.tools != nil {
			req.Tools = t.e.tools.Specs()
		}
		resp, err := t.call(ctx, provider, req, callIndex)
		if err != nil {
			var le *llm.Error
			if errors.As(err, &le) && le.Emitted && len(resp.Blocks) > 0 && ctx.Err() == nil {
				// Output already reached subscribers: keep it and end cleanly instead of retrying.
				if perr := t.persistReply(ctx, conv, provider, model, resp, callIndex, true); perr != nil {
					return t.fromError(ctx, perr)
				}
				return run.Outcome{Status: run.StatusFailed, FailureClass: string(le.Class), Error: "model stream failed after partial output: " + le.Error(), TerminationReason: "stream_failed"}, nil
			}
			if ctx.Err() != nil && len(resp.Blocks) > 0 {
				_ = t.persistReply(context.WithoutCancel(ctx), conv, provider, model, resp, callIndex, true)
			}
			return t.fromError(ctx, err)
		}
		if err := t.persistReply(ctx, conv, provider, model, resp, callIndex, false); err != nil {
			return t.fromError(ctx, err)
		}
		if len(resp.ToolCalls()) == 0 || !conv.Agentic {
			return run.Outcome{Status: run.StatusCompleted, TerminationReason: "completed"}, nil
		}
	}
}

var errTimeout = errors.New("attempt timed out (settings.timeoutSeconds)")

// stopped reports whether ctx ended (cancel, timeout) and the outcome that means.
func (t *turn) stopped(ctx context.Context, err error) (run.Outcome, bool) {
	if ctx.Err() == nil {
		return run.Outcome{}, false
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		return run.Outcome{Status: run.StatusTimedOut, FailureClass: string(llm.Transient), Error: cause.Error(), TerminationReason: "timeout"}, true
	case errors.Is(cause, ErrCancelled):
		return run.Outcome{Status: run.StatusCancelled, Error: "cancelled by the user", TerminationReason: "user_cancel"}, true
	default:
		// The worker is shutting down: the job is retried elsewhere.
		return run.Outcome{}, false
	}
}

// fromError maps an attempt's failure to an outcome or a retry.
func (t *turn) fromError(ctx context.Context, err error) (run.Outcome, *Retry) {
	if o, done := t.stopped(ctx, err); done {
		return o, nil
	}
	if errors.Is(err, run.ErrFenced) {
		return run.Outcome{}, &Retry{Class: llm.Terminal, Err: err} // never written: the lease is gone
	}
	le := llm.Classify(err)
	if ctx.Err() != nil {
		// Shutdown: try again on another worker.
		return failed(llm.Transient, err), &Retry{Class: llm.Transient, Err: err}
	}
	switch le.Class {
	case llm.Terminal:
		return failed(llm.Terminal, err), nil
	default:
		return failed(le.Class, err), &Retry{Class: le.Class, Err: err, Delay: le.RetryAfter}
	}
}

func failed(c llm.Class, err error) run.Outcome {
	return run.Outcome{Status: run.StatusFailed, FailureClass: string(c), Error: err.Error(), TerminationReason: "error"}
}

// load reads the conversation's context for this run and the run's tool calls.
func (t *turn) load(ctx context.Context, conv dbsqlc.Conversation) ([]dbsqlc.Message, []dbsqlc.ToolCall, error) {
	r := t.lease.Run
	var hist []dbsqlc.Message
	var calls []dbsqlc.ToolCall
	err := t.e.db.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		hist, err = tx.Q.MessageListContext(ctx, dbsqlc.MessageListContextParams{TenantID: r.TenantID, ConversationID: conv.ID, RunSeq: r.ConversationSeq})
		if err != nil {
			return err
		}
		calls, err = tx.Q.ToolCallListByRun(ctx, dbsqlc.ToolCallListByRunParams{TenantID: r.TenantID, RunID: r.ID})
		return err
	})
	return hist, calls, err
}

// llmCalls is the number of model replies this run has stored: the next call's index.
func (t *turn) llmCalls(hist []dbsqlc.Message) int {
	n := 0
	for _, m := range hist {
		if m.RunID.Valid && m.RunID.UUID == t.lease.Run.ID && m.LlmCallIndex != nil {
			n = max(n, int(*m.LlmCallIndex)+1)
		}
	}
	return n
}

func pendingCalls(calls []dbsqlc.ToolCall) []dbsqlc.ToolCall {
	var out []dbsqlc.ToolCall
	for _, c := range calls {
		if c.Status == "PENDING" || c.Status == "RUNNING" {
			out = append(out, c)
		}
	}
	return out
}

// call streams one model reply, publishing coalesced deltas as they come.
func (t *turn) call(ctx context.Context, p llm.Provider, req llm.Request, callIndex int) (llm.Response, error) {
	stream, err := p.Stream(ctx, req)
	if err != nil {
		return llm.Response{}, err
	}
	co := newCoalescer(t.e.pub, t.lease.Scope(), callIndex)
	resp, err := llm.Collect(stream, func(ev llm.Event) {
		if ev.Type == llm.EventTextDelta {
			co.add(ctx, ev.Text)
		}
	})
	co.flush(ctx)
	return resp, err
}

// persistReply stores the model's reply, its tool calls (PENDING), its usage record and their
// events in one fenced transaction.
func (t *turn) persistReply(ctx context.Context, conv dbsqlc.Conversation, p llm.Provider, model llm.Model, resp llm.Response, callIndex int, partial bool) error {
	r := t.lease.Run
	return t.e.runs.InFence(ctx, t.lease, func(ctx context.Context, tx *db.Tx) error {
		pos, err := tx.Q.ConversationNextPositions(ctx, dbsqlc.ConversationNextPositionsParams{TenantID: r.TenantID, ID: conv.ID, N: 1})
		if err != nil {
			return err
		}
		blocks := resp.Blocks
		if partial {
			// A cut stream's tool calls are unfinished: keep only the text that was shown.
			blocks = textOnly(blocks)
		}
		parts, err := json.Marshal(blocks)
		if err != nil {
			return err
		}
		text := llm.Message{Blocks: blocks}.Text()
		idx := int32(callIndex)
		msg, err := tx.Q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
			TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), ConversationID: conv.ID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true},
			RunSeq: r.ConversationSeq, Position: pos.MessageCount, Role: "ASSISTANT", Content: text, Parts: parts,
			TokenEstimate: int32(max(resp.Usage.OutputTokens, int64(len(text)/4))), LlmCallIndex: &idx,
		})
		if err != nil {
			return fmt.Errorf("store reply: %w", err)
		}
		news := []events.New{{Type: events.MessageCompleted, Data: map[string]any{
			"messageId": msg.ID, "role": "ASSISTANT", "content": text, "callIndex": callIndex, "partial": partial,
			"stopReason": resp.StopReason, "toolCalls": len(resp.ToolCalls()),
		}}}
		if !partial {
			for _, c := range resp.ToolCalls() {
				risk := 0
				if t.e.tools != nil {
					risk = t.e.tools.Risk(c.Name, c.Input)
				}
				if _, err := tx.Q.ToolCallInsert(ctx, dbsqlc.ToolCallInsertParams{
					TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, MessageID: msg.ID, CallID: c.ID,
					Turn: idx, Name: c.Name, Arguments: c.Input, Status: "PENDING", Risk: int32(risk),
				}); err != nil {
					return fmt.Errorf("store tool call: %w", err)
				}
			}
		}
		cost := model.Cost(resp.Usage)
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
				TenantID: r.TenantID, ID: r.ID, Attempt: t.lease.Attempt, InputTokens: rec.InputTokens,
				OutputTokens: rec.OutputTokens, CostMicros: rec.CostMicros, LlmCalls: idx + 1, Turns: idx + 1,
			}); err != nil {
				return err
			}
			news = append(news, events.New{Type: events.UsageRecorded, Data: map[string]any{
				"callIndex": callIndex, "provider": p.Name(), "model": model.ID, "inputTokens": rec.InputTokens,
				"outputTokens": rec.OutputTokens, "cachedTokens": rec.CachedTokens, "costMicros": rec.CostMicros,
			}})
		}
		_, err = t.e.pub.Append(ctx, tx, t.lease.Scope(), news...)
		return err
	})
}

// runTools executes pending tool calls one by one. Each call's effects, its result, the tool
// result message and its events commit together, so a crash never repeats a committed call.
func (t *turn) runTools(ctx context.Context, conv dbsqlc.Conversation, calls []dbsqlc.ToolCall) error {
	r := t.lease.Run
	for _, c := range calls {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.e.runs.InFence(ctx, t.lease, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Q.ToolCallStart(ctx, dbsqlc.ToolCallStartParams{TenantID: r.TenantID, ID: c.ID}); err != nil {
				return fmt.Errorf("start tool call: %w", err)
			}
			_, err := t.e.pub.Append(ctx, tx, t.lease.Scope(), events.New{Type: events.ToolStarted, Data: map[string]any{
				"toolCallId": c.ID, "name": c.Name, "arguments": json.RawMessage(c.Arguments),
			}})
			return err
		}); err != nil {
			return err
		}
		err := t.e.runs.InFence(ctx, t.lease, func(ctx context.Context, tx *db.Tx) error {
			var output string
			var runErr error
			if t.e.tools == nil {
				runErr = fmt.Errorf("tools are disabled")
			} else {
				// The tool runs in a savepoint: its failure undoes its partial effects only.
				runErr = t.e.db.InTx(ctx, r.TenantID, func(ctx context.Context, stx *db.Tx) error {
					var err error
					output, err = t.e.tools.Run(ctx, stx, ToolCall{TenantID: r.TenantID, ProjectID: conv.ProjectID, UserID: r.UserID, RunID: r.ID, Name: c.Name, Args: c.Arguments})
					return err
				})
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			status, evType := "COMPLETED", events.ToolCompleted
			result := llm.Block{Type: llm.BlockToolResult, ToolUseID: c.CallID, Content: output}
			var outPtr, errPtr *string
			if runErr != nil {
				status, evType = "FAILED", events.ToolFailed
				msg := runErr.Error()
				result.Content, result.IsError = msg, true
				errPtr = &msg
			} else {
				outPtr = &output
			}
			if _, err := tx.Q.ToolCallFinish(ctx, dbsqlc.ToolCallFinishParams{TenantID: r.TenantID, ID: c.ID, Status: status, Output: outPtr, Error: errPtr}); err != nil {
				return fmt.Errorf("finish tool call: %w", err)
			}
			pos, err := tx.Q.ConversationNextPositions(ctx, dbsqlc.ConversationNextPositionsParams{TenantID: r.TenantID, ID: conv.ID, N: 1})
			if err != nil {
				return err
			}
			parts, _ := json.Marshal([]llm.Block{result})
			if _, err := tx.Q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
				TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), ConversationID: conv.ID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true},
				RunSeq: r.ConversationSeq, Position: pos.MessageCount, Role: "TOOL", Content: result.Content, Parts: parts,
				TokenEstimate: int32(len(result.Content) / 4),
			}); err != nil {
				return fmt.Errorf("store tool result: %w", err)
			}
			data := map[string]any{"toolCallId": c.ID, "name": c.Name, "output": truncate(result.Content, 2000)}
			if runErr != nil {
				data = map[string]any{"toolCallId": c.ID, "name": c.Name, "error": truncate(result.Content, 2000)}
			}
			_, err = t.e.pub.Append(ctx, tx, t.lease.Scope(), events.New{Type: evType, Data: data})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
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
			continue
		}
		if len(out) > 0 && out[len(out)-1].Role == role {
			out[len(out)-1].Blocks = append(out[len(out)-1].Blocks, blocks...)
			continue
		}
		out = append(out, llm.Message{Role: role, Blocks: blocks})
	}
	return closeToolUses(out)
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
