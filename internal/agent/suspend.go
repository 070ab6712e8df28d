package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// ApprovalState is where a person's decision on an approval stands, as the executor acts on it.
// Its zero value (ApprovalNone) means no person was asked.
type ApprovalState string

// Approval states (the values of internal/approval's statuses).
const (
	ApprovalNone     ApprovalState = ""
	ApprovalPending  ApprovalState = "PENDING"
	ApprovalApproved ApprovalState = "APPROVED"
	ApprovalRejected ApprovalState = "REJECTED"
	ApprovalExpired  ApprovalState = "EXPIRED"
)

// ApprovalKind is what the executor asks a person about: one of the ApprovalKind constants.
type ApprovalKind string

// Approval kinds the executor asks (the names of internal/approval's kinds).
const (
	// ApprovalToolCall asks whether one tool call may run.
	ApprovalToolCall ApprovalKind = "tool_call"
	// ApprovalContinue asks whether a long run may go on (the long-task confirmation).
	ApprovalContinue ApprovalKind = "continue"
	// ApprovalEscalation hands a question the agent cannot settle to a person.
	ApprovalEscalation ApprovalKind = "escalation"
)

// Approvals is human-in-the-loop as the executor needs it (internal/app adapts
// internal/approval's service to it).
type Approvals interface {
	// Needs decides whether a call needs a person.
	Needs(s settings.Settings, known, readOnly bool, risk int) bool
	// Request asks a person inside the fenced tx and parks the run AWAITING_APPROVAL.
	Request(ctx context.Context, tx *db.Tx, l run.Lease, kind ApprovalKind, call *dbsqlc.ToolCall, question string, data map[string]any) error
	// ToolCall returns the decision on a call: APPROVED only when the approval is bound to exactly
	// this call (tool name and arguments hash) and was decided before it expired.
	ToolCall(ctx context.Context, tx *db.Tx, call dbsqlc.ToolCall) (ApprovalState, error)
	// Latest returns the newest decision of a kind for the run, its note and its data.
	Latest(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind ApprovalKind) (ApprovalState, string, map[string]any, error)
}

// suspend parks the run with events (pause).
func (a *attempt) suspend(ctx context.Context, status run.Status, news ...events.New) result {
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		_, err := a.e.runs.Suspend(ctx, tx, a.lease, status, news...)
		return err
	})
	if err != nil {
		return a.fromError(ctx, err)
	}
	return result{suspended: true}
}

// suspendFor asks a person (an approval of kind) and parks the run AWAITING_APPROVAL.
func (a *attempt) suspendFor(ctx context.Context, kind ApprovalKind, call *dbsqlc.ToolCall, question string, data map[string]any) result {
	if a.e.approvals == nil {
		return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), Error: "approval needed but approvals are not configured: " + question, TerminationReason: ReasonEscalated})
	}
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		return a.e.approvals.Request(ctx, tx, a.lease, kind, call, question, data)
	})
	if err != nil {
		return a.fromError(ctx, err)
	}
	return result{suspended: true}
}

func (a *attempt) requestApproval(ctx context.Context, c dbsqlc.ToolCall, risk int) result {
	q := fmt.Sprintf("Allow %s with %s (risk %d)?", c.Name, truncate(string(c.Arguments), 500), risk)
	return a.suspendFor(ctx, ApprovalToolCall, &c, q, map[string]any{"risk": risk})
}

// askToContinue pauses a long run for the user's confirmation (an approval of kind continue).
func (a *attempt) askToContinue(ctx context.Context, calls int) result {
	q := fmt.Sprintf("The run has taken %d turns. Continue?", calls)
	return a.suspendFor(ctx, ApprovalContinue, nil, q, map[string]any{"turns": calls})
}

// confirmedAt is the turn count the user last agreed to go on at (0 when never asked). A
// rejected confirmation ends the run as a user stop, handled by the caller through Latest.
func (a *attempt) confirmedAt(ctx context.Context) int {
	if a.e.approvals == nil || a.limits.ConfirmAfter == 0 {
		return 0
	}
	var state ApprovalState
	var data map[string]any
	_ = a.e.db.InTx(ctx, a.lease.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		state, _, data, err = a.e.approvals.Latest(ctx, tx, a.lease.Run.TenantID, a.lease.Run.ID, ApprovalContinue)
		return err
	})
	turns, _ := data["turns"].(float64)
	switch state {
	case ApprovalApproved:
		return int(turns)
	case ApprovalRejected, ApprovalExpired:
		return -int(turns) // declined: the caller stops
	}
	return 0
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
		state, note, _, err = a.e.approvals.Latest(ctx, tx, r.TenantID, r.ID, ApprovalEscalation)
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
		err = a.e.runs.InFenceConversation(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
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

// park lets a waiting call (wait_subagents) park the run before its step runs: when the step
// is the wait alone, or the wait with calls that only read, and what it waits for has not
// happened, the run is parked WAITING (no worker held) and the step runs once it is resumed. A
// wait in a step with calls that change something runs at once (it answers with where things
// stand), so that nothing of such a step waits on its own effects.
func (a *attempt) park(ctx context.Context, step []dbsqlc.ToolCall) (result, bool) {
	w := a.e.waiter
	if w == nil {
		return result{}, false
	}
	var wait *dbsqlc.ToolCall
	for i, c := range step {
		if w.Waits(c.Name) && (a.limits.AllowTool == nil || a.limits.AllowTool(c.Name)) {
			if wait == nil {
				wait = &step[i]
			}
			continue
		}
		if _, readOnly := a.tools().Info(c.Name); !readOnly {
			return result{}, false
		}
	}
	if wait == nil {
		return result{}, false
	}
	parked := false
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		var err error
		parked, err = w.Park(ctx, tx, a.lease, *wait)
		return err
	})
	if err != nil {
		return a.fromError(ctx, err), true
	}
	if parked {
		return result{suspended: true}, true
	}
	return result{}, false
}
