package agent

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// ServiceApprovals connects the approval service to the executor.
type ServiceApprovals struct{ Service *approval.Service }

// Needs applies the settings: unknown tools always; autoExecute off: every call that changes
// something; on: calls riskier than the threshold.
func (a ServiceApprovals) Needs(s settings.Settings, known, readOnly bool, risk int) bool {
	return approval.Needs(s.AutoExecute, s.ApprovalThreshold, known, readOnly, risk)
}

// Request asks a person and parks the run.
func (a ServiceApprovals) Request(ctx context.Context, tx *db.Tx, l run.Lease, kind string, call *dbsqlc.ToolCall, question string, data map[string]any) error {
	_, err := a.Service.Request(ctx, tx, l, approval.Request{Kind: kind, ToolCall: call, Question: question, Data: data})
	return err
}

// ToolCall is APPROVED only when the newest approval of the call permits exactly this call
// (tool, arguments hash, decided before it expired); an approval that does not is treated as
// refused, never as granted.
func (a ServiceApprovals) ToolCall(ctx context.Context, tx *db.Tx, call dbsqlc.ToolCall) (ApprovalState, error) {
	ap, found, err := a.Service.ForToolCall(ctx, tx, call.TenantID, call.ID)
	if err != nil || !found {
		return ApprovalNone, err
	}
	switch ap.Status {
	case approval.StatusPending:
		return ApprovalPending, nil
	case approval.StatusApproved:
		if approval.Permits(ap, call) {
			return ApprovalApproved, nil
		}
		return ApprovalRejected, nil
	case approval.StatusExpired:
		return ApprovalExpired, nil
	}
	return ApprovalRejected, nil
}

// Latest returns the newest decision of a kind for the run, its note and data.
func (a ServiceApprovals) Latest(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind string) (ApprovalState, string, map[string]any, error) {
	ap, found, err := a.Service.Latest(ctx, tx, tenantID, runID, kind)
	if err != nil || !found {
		return ApprovalNone, "", nil, err
	}
	var data map[string]any
	_ = json.Unmarshal(ap.Data, &data)
	note := ""
	if ap.Note != nil {
		note = *ap.Note
	}
	return ApprovalState(ap.Status), note, data, nil
}
