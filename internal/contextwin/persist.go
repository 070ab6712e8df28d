package contextwin

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
)

// Persist stores what a window did, inside tx (the run's fenced transaction, attempt being
// the run's fence): the conversation's new summary and the last message it covers, one usage
// record per summarisation call that answered, added to the run's totals, and it returns the
// events to append with them (usage.recorded per call, context.window.applied) and the calls it
// metered: the caller settles their reservations in tx.
//
// Summarisation calls are metered with negative call indexes (-1, -2, ... per run), below the
// model calls' 0, 1, ...: usage_records is unique per (run, call index), and the summaries of
// a run never take an index a model call will need. A Meter numbers the calls when it
// reserves them (NextSummaryIndex); calls without an index are numbered here the same way.
func Persist(ctx context.Context, tx *db.Tx, r dbsqlc.Run, attempt int32, conversationID uuid.UUID, a *Applied) ([]events.New, []Metered, error) {
	if a == nil {
		return nil, nil, nil
	}
	var news []events.New
	if !a.Fallback && a.Summary != "" {
		summary := a.Summary
		if err := tx.Q.ConversationSetSummary(ctx, dbsqlc.ConversationSetSummaryParams{
			TenantID: r.TenantID, ID: conversationID, Summary: &summary, SummarizedThrough: uuid.NullUUID{UUID: a.Through, Valid: true},
		}); err != nil {
			return nil, nil, fmt.Errorf("store summary: %w", err)
		}
	}
	var metered []Metered
	next := 0
	for _, c := range a.Calls {
		u := c.Usage
		if u.InputTokens+u.OutputTokens == 0 {
			continue
		}
		idx := c.Index
		if idx == 0 {
			if next == 0 {
				var err error
				if next, err = NextSummaryIndex(ctx, tx, r); err != nil {
					return nil, nil, err
				}
			}
			idx, next = next, next-1
		}
		m, err := MeterCall(ctx, tx, r, attempt, a.Provider, a.Model, idx, u)
		if err != nil {
			return nil, nil, err
		}
		if m == nil {
			continue // metered already
		}
		metered = append(metered, *m)
		news = append(news, events.New{Type: events.UsageRecorded, Data: map[string]any{
			"callIndex": idx, "purpose": "context_summary", "provider": a.Provider, "model": a.Model.ID,
			"inputTokens": u.InputTokens, "outputTokens": u.OutputTokens, "cachedTokens": u.CachedTokens, "costMicros": m.CostMicros,
		}})
	}
	return append(news, events.New{Type: events.ContextWindowApplied, Data: a.EventData()}), metered, nil
}

// MeterCall stores the usage record of summarisation call idx of run r (provider, model, u)
// and adds its usage to the run, in tx. It returns nil when the call was metered already.
func MeterCall(ctx context.Context, tx *db.Tx, r dbsqlc.Run, attempt int32, provider string, model llm.Model, idx int, u llm.Usage) (*Metered, error) {
	rec, err := tx.Q.UsageRecordInsert(ctx, dbsqlc.UsageRecordInsertParams{
		TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, UserID: r.UserID, RunKind: r.Kind, CallIndex: int32(idx),
		Provider: provider, Model: model.ID, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.CachedTokens, CostMicros: model.Cost(u),
	})
	if db.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meter summary: %w", err)
	}
	if err := tx.Q.RunAddUsage(ctx, dbsqlc.RunAddUsageParams{
		TenantID: r.TenantID, ID: r.ID, Attempt: attempt, InputTokens: rec.InputTokens,
		OutputTokens: rec.OutputTokens, CostMicros: rec.CostMicros,
	}); err != nil {
		return nil, err
	}
	return &Metered{Index: idx, Usage: u, CostMicros: rec.CostMicros}, nil
}

// Metered is a summarisation call Persist stored a usage record for: its reservation is
// settled with Usage and CostMicros.
type Metered struct {
	Index      int
	Usage      llm.Usage
	CostMicros int64
}

// NextSummaryIndex is the call index the run's next summarisation call takes: one below the
// lowest its usage records hold, and -1 for the first.
func NextSummaryIndex(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (int, error) {
	low, err := tx.Q.UsageRecordMinCallIndex(ctx, dbsqlc.UsageRecordMinCallIndexParams{TenantID: r.TenantID, RunID: r.ID})
	if err != nil {
		return 0, fmt.Errorf("summary call index: %w", err)
	}
	return int(min(low, 0)) - 1, nil
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
