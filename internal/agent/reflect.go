package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

const reflectInstruction = "Several tool calls in a row have failed. Before calling any tool again, explain briefly what is going wrong and what you will do differently. Do not call tools in this reply."

// reflect applies the ErrorClassifier to a step's failures and the breaker's first level.
func (a *attempt) reflect(ctx context.Context, p llm.Provider, m llm.Model, st state, res stepResult) (result, bool) {
	consecutive := int(st.run.ConsecutiveFailures)
	if res.ok > 0 {
		consecutive = 0
	}
	consecutive += len(res.failures)
	decision := ErrorClassifier{}.Classify(res.failures, a.earlier, consecutive)
	a.earlier = append(a.earlier, res.failures...)
	backtracks := int(st.run.Backtracks)
	mustReflect := st.run.MustReflect
	switch decision {
	case Escalate:
		q := "The agent needs your help: " + truncate(res.failures[0].Error, 500) + ". Approve to let it go on (add guidance in the note), or reject to stop the run."
		r := a.suspendFor(ctx, ApprovalEscalation, nil, q, map[string]any{"failures": res.failures})
		return r, true
	case FailGracefully:
		if err := a.saveBreaker(ctx, consecutive, backtracks, false); err != nil {
			return a.fromError(ctx, err), true
		}
		st.run.ConsecutiveFailures = int32(consecutive)
		return a.summarise(ctx, p, m, st, ReasonFailures, run.StatusFailed), true
	case Backtrack:
		backtracks++
		// A new approach starts: backtrack resets the consecutive failures.
		if err := a.backtrack(ctx, st, res, backtracks); err != nil {
			return a.fromError(ctx, err), true
		}
		if backtracks >= MaxBacktracks {
			return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: ReasonCircuitOpen,
				Error: fmt.Sprintf("circuit open: %d backtracks", backtracks)}), true
		}
		return result{}, false
	}
	if consecutive >= ReflectAfterFailures && consecutive < MaxConsecutiveFailures && !mustReflect && consecutive-len(res.failures) < ReflectAfterFailures {
		mustReflect = true
	}
	if err := a.saveBreaker(ctx, consecutive, backtracks, mustReflect); err != nil {
		return a.fromError(ctx, err), true
	}
	return result{}, false
}

// backtrack takes the failed calls' assistant messages and their results out of the context and
// puts a reflection summary in their place.
func (a *attempt) backtrack(ctx context.Context, st state, res stepResult, backtracks int) error {
	failed := map[uuid.UUID]bool{}
	for _, id := range res.failedIDs {
		failed[id] = true
	}
	// The approach includes earlier attempts at the very same call.
	for _, c := range st.calls {
		for _, f := range res.failures {
			if c.Status == run.ToolCallFailed && c.Name == f.Name && bytes.Equal(compact(c.Arguments), compact(f.Args)) {
				failed[c.ID] = true
			}
		}
	}
	// The assistant messages that made the failed calls, and every result of their calls.
	msgIDs := map[uuid.UUID]bool{}
	callIDs := map[string]bool{}
	for _, c := range st.calls {
		if failed[c.ID] {
			msgIDs[c.MessageID] = true
		}
	}
	for _, c := range st.calls {
		if msgIDs[c.MessageID] {
			callIDs[c.CallID] = true
		}
	}
	var exclude []uuid.UUID
	for id := range msgIDs {
		exclude = append(exclude, id)
	}
	hist, _, err := a.historyAfter(ctx)
	if err != nil {
		return err
	}
	for _, m := range hist {
		if m.Role != "TOOL" {
			continue
		}
		var blocks []llm.Block
		_ = json.Unmarshal(m.Parts, &blocks)
		for _, b := range blocks {
			if callIDs[b.ToolUseID] {
				exclude = append(exclude, m.ID)
				break
			}
		}
	}
	summary := reflectionSummary(res.failures)
	return a.e.runs.InFenceConversation(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		if err := tx.Q.MessageExclude(ctx, dbsqlc.MessageExcludeParams{TenantID: a.lease.Run.TenantID, Ids: exclude}); err != nil {
			return err
		}
		if _, err := a.insertMessage(ctx, tx, "SYSTEM", []llm.Block{{Type: llm.BlockText, Text: summary}}, nil); err != nil {
			return err
		}
		if err := tx.Q.RunSetBreaker(ctx, dbsqlc.RunSetBreakerParams{TenantID: a.lease.Run.TenantID, ID: a.lease.Run.ID, Attempt: a.lease.Attempt,
			ConsecutiveFailures: 0, Backtracks: int32(backtracks), MustReflect: false}); err != nil {
			return err
		}
		_, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), events.New{Type: events.ExecutionBacktracked, Data: map[string]any{
			"backtracks": backtracks, "summary": summary, "excludedMessages": len(exclude),
		}})
		return err
	})
}

func (a *attempt) historyAfter(ctx context.Context) ([]dbsqlc.Message, []dbsqlc.ToolCall, error) {
	st, err := a.load(ctx)
	return st.hist, st.calls, err
}

// saveBreaker stores the breaker state (and events) in a fenced tx.
func (a *attempt) saveBreaker(ctx context.Context, consecutive, backtracks int, mustReflect bool, news ...events.New) error {
	r := a.lease.Run
	return a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		if err := tx.Q.RunSetBreaker(ctx, dbsqlc.RunSetBreakerParams{TenantID: r.TenantID, ID: r.ID, Attempt: a.lease.Attempt,
			ConsecutiveFailures: int32(consecutive), Backtracks: int32(backtracks), MustReflect: mustReflect}); err != nil {
			return err
		}
		_, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), news...)
		return err
	})
}

// summarise ends the run with a summary of what was done and why it stopped, asked of the
// model without tools; if that fails, a summary is assembled from the run's tool calls.
func (a *attempt) summarise(ctx context.Context, p llm.Provider, m llm.Model, st state, reason string, status run.Status) result {
	why := map[string]string{
		ReasonUserStop: "the user asked to stop", ReasonFailures: fmt.Sprintf("%d tool calls in a row failed", MaxConsecutiveFailures),
	}[reason]
	req := llm.Request{Model: m.ID, System: a.systemPrompt(st.run) + "\n\nThe run is stopping because " + why +
		". Summarise briefly what has been done, what is left, and why you stopped. Do not call tools.", Messages: toLLM(st.hist), MaxTokens: 1024}
	calls := max(int(st.run.LlmCalls), a.llmCalls(st.hist))
	resp, err := a.call(ctx, p, req, calls)
	if err == nil {
		resp.Blocks = textOnly(resp.Blocks)
		err = a.persistReply(ctx, p, m, resp, calls, false)
	}
	if err != nil {
		if o, ok := a.stopped(ctx); ok {
			return done(o)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Stopped: %s.", why)
		for _, c := range st.calls {
			fmt.Fprintf(&b, "\n- %s: %s", c.Name, c.Status)
		}
		_ = a.e.runs.InFenceConversation(context.WithoutCancel(ctx), a.lease, func(ctx context.Context, tx *db.Tx) error {
			_, err := a.insertMessage(ctx, tx, "SYSTEM", []llm.Block{{Type: llm.BlockText, Text: b.String()}}, nil)
			return err
		})
	}
	o := run.Outcome{Status: status, TerminationReason: reason}
	if status == run.StatusFailed {
		o.FailureClass, o.Error = string(llm.Terminal), "stopped: "+why
		if reason == ReasonFailures {
			o.Data = map[string]any{"decision": string(FailGracefully)}
		}
	}
	return done(o)
}

// endReflection closes a reflection turn: the breaker's first level resets and a note follows
// the reflection, so the reply is never mistaken for the model stopping.
func (a *attempt) endReflection(ctx context.Context, st state, reflection string) error {
	r := a.lease.Run
	return a.e.runs.InFenceConversation(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
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
