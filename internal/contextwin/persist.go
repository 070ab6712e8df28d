package contextwin

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// Persist stores what a window did, inside tx (the run's fenced transaction, attempt being
// the run's fence): the conversation's new summary and the last message it covers, a usage
// record for the summarisation calls, added to the run's totals, and it returns the events to
// append with them (usage.recorded, context.window.applied).
//
// Summarisation calls are metered with negative call indexes (-1, -2, ... per run), below the
// model calls' 0, 1, ...: usage_records is unique per (run, call index), and the summaries of
// a run never take an index a model call will need.
func Persist(ctx context.Context, tx *db.Tx, r dbsqlc.Run, attempt int32, conversationID uuid.UUID, a *Applied) ([]events.New, error) {
	if a == nil {
		return nil, nil
	}
	var news []events.New
	if !a.Fallback && a.Summary != "" {
		summary := a.Summary
		if err := tx.Q.ConversationSetSummary(ctx, dbsqlc.ConversationSetSummaryParams{
			TenantID: r.TenantID, ID: conversationID, Summary: &summary, SummarizedThrough: uuid.NullUUID{UUID: a.Through, Valid: true},
		}); err != nil {
			return nil, fmt.Errorf("store summary: %w", err)
		}
	}
	if u := a.Usage; u.InputTokens+u.OutputTokens > 0 {
		low, err := tx.Q.UsageRecordMinCallIndex(ctx, dbsqlc.UsageRecordMinCallIndexParams{TenantID: r.TenantID, RunID: r.ID})
		if err != nil {
			return nil, fmt.Errorf("summary call index: %w", err)
		}
		idx := min(low, 0) - 1
		rec, err := tx.Q.UsageRecordInsert(ctx, dbsqlc.UsageRecordInsertParams{
			TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, UserID: r.UserID, RunKind: r.Kind, CallIndex: idx,
			Provider: a.Provider, Model: a.Model.ID, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CachedTokens: u.CachedTokens, CostMicros: a.Model.Cost(u),
		})
		if err != nil {
			return nil, fmt.Errorf("meter summary: %w", err)
		}
		if err := tx.Q.RunAddUsage(ctx, dbsqlc.RunAddUsageParams{
			TenantID: r.TenantID, ID: r.ID, Attempt: attempt, InputTokens: rec.InputTokens,
			OutputTokens: rec.OutputTokens, CostMicros: rec.CostMicros,
		}); err != nil {
			return nil, err
		}
		news = append(news, events.New{Type: events.UsageRecorded, Data: map[string]any{
			"callIndex": idx, "purpose": "context_summary", "provider": a.Provider, "model": a.Model.ID,
			"inputTokens": rec.InputTokens, "outputTokens": rec.OutputTokens, "cachedTokens": rec.CachedTokens, "costMicros": rec.CostMicros,
		}})
	}
	return append(news, events.New{Type: events.ContextWindowApplied, Data: a.EventData()}), nil
}

// EventData is the context.window.applied event's data.
func (a *Applied) EventData() map[string]any {
	d := map[string]any{
		"strategy": a.Strategy, "mode": a.Mode, "reason": a.Reason, "budget": a.Budget,
		"tokensBefore": a.TokensBefore, "tokensAfter": a.TokensAfter,
		"messagesSummarized": a.MessagesSummarized, "messagesKept": a.MessagesKept,
		"fallback": a.Fallback, "summaryModel": a.SummaryModel,
	}
	if a.Fallback {
		d["error"] = clip(a.Error, 500)
	}
	return d
}
