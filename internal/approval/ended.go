package approval

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
)

// RequestForEnded asks a person about a run that has ended (or is ending, inside tx), without
// suspending it: the rollback question of a failed, cancelled or timed-out run whose workspace
// changes someone must decide on (kind rollback). Anything the run still had pending is
// expired first (a run waits on one question at a time). It inserts the PENDING approval
// (expiring now+ttl) and appends approval.requested to the run's events.
func (s *Service) RequestForEnded(ctx context.Context, tx *db.Tx, r dbsqlc.Run, kind, question string, data map[string]any) (dbsqlc.Approval, error) {
	if !ValidKind(kind) || kind == KindToolCall {
		return dbsqlc.Approval{}, fmt.Errorf("approval kind %q cannot be asked of an ended run", kind)
	}
	if _, err := tx.Q.WorkspaceRunApprovalsClose(ctx, dbsqlc.WorkspaceRunApprovalsCloseParams{TenantID: r.TenantID, RunID: r.ID}); err != nil {
		return dbsqlc.Approval{}, fmt.Errorf("close pending approvals: %w", err)
	}
	return s.Ask(ctx, tx, r, kind, question, data)
}

// Ask asks a person about run r inside tx without suspending it: r is not being worked (a
// sub-agent waiting for its start, kind subagent) or has ended (RequestForEnded). It inserts
// the PENDING approval (expiring now+ttl) and appends approval.requested to r's events; the
// decision is applied by the kind's DecisionHook (OnDecision), the expiry by its ExpiryHook.
func (s *Service) Ask(ctx context.Context, tx *db.Tx, r dbsqlc.Run, kind, question string, data map[string]any) (dbsqlc.Approval, error) {
	if !ValidKind(kind) || kind == KindToolCall {
		return dbsqlc.Approval{}, fmt.Errorf("approval kind %q cannot be asked of a run that is not working", kind)
	}
	if q := []rune(question); len(q) > MaxQuestionLength {
		question = string(q[:MaxQuestionLength-1]) + "…"
	}
	raw := []byte("{}")
	if len(data) > 0 {
		var err error
		if raw, err = json.Marshal(data); err != nil {
			return dbsqlc.Approval{}, fmt.Errorf("marshal approval data: %w", err)
		}
	}
	now := s.now().UTC()
	a, err := tx.Q.ApprovalInsert(ctx, dbsqlc.ApprovalInsertParams{
		TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, Kind: kind,
		Question: nonEmpty(question), CreatedAt: now, ExpiresAt: now.Add(s.ttl), Data: raw,
	})
	if err != nil {
		return a, fmt.Errorf("insert approval: %w", err)
	}
	ev := map[string]any{}
	for k, v := range data {
		ev[k] = v
	}
	ev["approvalId"], ev["kind"], ev["question"], ev["expiresAt"] = a.ID, a.Kind, question, a.ExpiresAt
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), events.New{Type: events.ApprovalRequested, Data: ev}); err != nil {
		return a, err
	}
	return a, nil
}
