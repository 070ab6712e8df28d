package app

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// executorApprovals is the approval service as the executor asks it (agent.Approvals).
type executorApprovals struct{ svc *approval.Service }

// Needs applies the settings: unknown tools always; autoExecute off: every call that changes
// something; on: calls riskier than the threshold.
func (a executorApprovals) Needs(s settings.Settings, known, readOnly bool, risk int) bool {
	return approval.Needs(s.AutoExecute, s.ApprovalThreshold, known, readOnly, risk)
}

// Request asks a person and parks the run.
func (a executorApprovals) Request(ctx context.Context, tx *db.Tx, l run.Lease, kind agent.ApprovalKind, call *dbsqlc.ToolCall, question string, data map[string]any) error {
	_, err := a.svc.Request(ctx, tx, l, approval.Request{Kind: kindOf(kind), ToolCall: call, Question: question, Data: data})
	return err
}

// ToolCall is APPROVED only when the newest approval of the call permits exactly this call
// (tool, arguments hash, decided before it expired); an approval that does not is treated as
// refused, never as granted.
func (a executorApprovals) ToolCall(ctx context.Context, tx *db.Tx, call dbsqlc.ToolCall) (agent.ApprovalState, error) {
	ap, found, err := a.svc.ForToolCall(ctx, tx, call.TenantID, call.ID)
	if err != nil || !found {
		return agent.ApprovalNone, err
	}
	switch ap.Status {
	case approval.StatusPending:
		return agent.ApprovalPending, nil
	case approval.StatusApproved:
		if approval.Permits(ap, call) {
			return agent.ApprovalApproved, nil
		}
		return agent.ApprovalRejected, nil
	case approval.StatusExpired:
		return agent.ApprovalExpired, nil
	}
	return agent.ApprovalRejected, nil
}

// Latest returns the newest decision of a kind for the run, its note and data.
func (a executorApprovals) Latest(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind agent.ApprovalKind) (agent.ApprovalState, string, map[string]any, error) {
	ap, found, err := a.svc.Latest(ctx, tx, tenantID, runID, kindOf(kind))
	if err != nil || !found {
		return agent.ApprovalNone, "", nil, err
	}
	var data map[string]any
	_ = json.Unmarshal(ap.Data, &data)
	note := ""
	if ap.Note != nil {
		note = *ap.Note
	}
	return stateOf(ap.Status), note, data, nil
}

// kindOf maps the executor's ApprovalKind to the approval service's kind.
func kindOf(k agent.ApprovalKind) string {
	switch k {
	case agent.ApprovalToolCall:
		return approval.KindToolCall
	case agent.ApprovalContinue:
		return approval.KindContinue
	case agent.ApprovalEscalation:
		return approval.KindEscalation
	}
	return string(k)
}

// stateOf maps an approval's stored status to the executor's ApprovalState.
func stateOf(status approval.Status) agent.ApprovalState {
	switch status {
	case approval.StatusPending:
		return agent.ApprovalPending
	case approval.StatusApproved:
		return agent.ApprovalApproved
	case approval.StatusRejected:
		return agent.ApprovalRejected
	case approval.StatusExpired:
		return agent.ApprovalExpired
	}
	return agent.ApprovalNone
}
