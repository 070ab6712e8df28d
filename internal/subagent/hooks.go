package subagent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
)

var (
	_ agent.KindHooks = (*Service)(nil)
	_ agent.Waiter    = (*Service)(nil)
	_ run.FinishHook  = (*Service)(nil).Finished
)

// Limits are a sub-agent run's limits: its max turns, max tokens (its own input and output),
// its timeout (TIMED_OUT), and its tools.
func (s *Service) Limits(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (agent.Limits, error) {
	sa, err := tx.Q.SubagentGet(ctx, dbsqlc.SubagentGetParams{TenantID: r.TenantID, ID: r.ID})
	if err != nil {
		return agent.Limits{}, fmt.Errorf("load sub-agent %s: %w", r.ID, err)
	}
	tools := sa.Tools
	return agent.Limits{
		MaxTurns:    int(sa.MaxTurns),
		MaxDuration: time.Duration(sa.TimeoutMinutes) * time.Minute,
		MaxTokens:   int64(sa.MaxTokens),
		TimesOut:    true,
		AllowTool:   func(name string) bool { return slices.Contains(tools, name) },
	}, nil
}

// Started marks the sub-agent RUNNING when a worker first takes its run, with subagent.started on
// the parent's stream. It runs in the child's fenced transaction, which holds the child's row;
// the parent's row is locked after it (a child's row before its parent's: the order of every
// cascade).
func (s *Service) Started(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	sa, err := tx.Q.SubagentGet(ctx, dbsqlc.SubagentGetParams{TenantID: r.TenantID, ID: r.ID})
	if err != nil {
		return fmt.Errorf("load sub-agent %s: %w", r.ID, err)
	}
	if sa.Status == StatusRunning {
		return nil
	}
	parent, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: r.TenantID, ID: sa.ParentRunID})
	if err != nil {
		return fmt.Errorf("lock parent run: %w", err)
	}
	resumed := sa.StartedAt != nil
	if sa, err = tx.Q.SubagentSetStatus(ctx, dbsqlc.SubagentSetStatusParams{TenantID: r.TenantID, ID: r.ID, Status: string(StatusRunning)}); err != nil {
		return err
	}
	if resumed {
		return nil // it ran before and waited for its own: subagent.started was said then
	}
	var queued any
	if sa.DispatchedAt != nil {
		queued = time.Since(sa.CreatedAt).Milliseconds()
	}
	_, err = s.runs.Publisher().Append(ctx, tx, run.ScopeOf(parent), events.New{Type: events.SubagentStarted, Data: eventData(sa, map[string]any{"waitedMs": queued})})
	return err
}

// endEvents maps a run's terminal status to the parent's event.
var endEvents = map[run.Status]string{
	run.StatusCompleted: events.SubagentCompleted,
	run.StatusFailed:    events.SubagentFailed,
	run.StatusCancelled: events.SubagentCancelled,
	run.StatusTimedOut:  events.SubagentTimedOut,
}

// ParentConversation is the run.ConversationsHook of SUBAGENT runs: a sub-agent's end may resume
// its parent, which hands the parent's conversation to it, so that conversation is locked
// before the sub-agent's own and its run. A cascade locks conversations in the same order
// (ancestors' first), then the runs.
func (s *Service) ParentConversation(ctx context.Context, tx *db.Tx, r dbsqlc.Run) ([]uuid.UUID, error) {
	if !r.ParentRunID.Valid {
		return nil, nil
	}
	p, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: r.TenantID, ID: r.ParentRunID.UUID})
	if db.IsNoRows(err) || err == nil && !p.ConversationID.Valid {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parent of sub-agent run %s: %w", r.ID, err)
	}
	return []uuid.UUID{p.ConversationID.UUID}, nil
}

// Finished records a sub-agent's end in the transaction that ends its run: its status, its
// final answer (whole) or error, the end's event on the parent's stream (tokens, duration,
// error and failure class), the parent resumed when it was waiting for it and waits for no one
// else, and a dispatcher pass (its slot is free).
func (s *Service) Finished(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
	parent, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: fin.TenantID, ID: fin.ParentRunID.UUID})
	if err != nil {
		return fmt.Errorf("lock parent run: %w", err)
	}
	var result *string
	if fin.Status == run.StatusCompleted {
		reply, err := tx.Q.RunLastReply(ctx, dbsqlc.RunLastReplyParams{TenantID: fin.TenantID, RunID: fin.ID})
		if err != nil && !db.IsNoRows(err) {
			return fmt.Errorf("final answer: %w", err)
		}
		if err == nil {
			result = &reply.Content
		}
	}
	sa, err := tx.Q.SubagentFinish(ctx, dbsqlc.SubagentFinishParams{TenantID: fin.TenantID, ID: fin.ID, Status: Status(fin.Status),
		Result: result, Error: fin.Error, FailureClass: fin.FailureClass})
	if err != nil {
		return fmt.Errorf("finish sub-agent %s: %w", fin.ID, err)
	}
	if _, err := tx.Q.SubagentMarkReported(ctx, dbsqlc.SubagentMarkReportedParams{TenantID: fin.TenantID, ID: fin.ID}); err != nil && !db.IsNoRows(err) {
		return err
	}
	if fin.StartedAt == nil {
		// It never started: a start approval it still waited on can no longer be decided.
		if _, err := tx.Q.WorkspaceRunApprovalsClose(ctx, dbsqlc.WorkspaceRunApprovalsCloseParams{TenantID: fin.TenantID, RunID: fin.ID}); err != nil {
			return fmt.Errorf("close start approval: %w", err)
		}
	}
	data := eventData(sa, map[string]any{
		"status": fin.Status, "inputTokens": fin.InputTokens, "outputTokens": fin.OutputTokens, "costMicros": fin.CostMicros,
	})
	if fin.StartedAt != nil && fin.FinishedAt != nil {
		data["durationMs"] = fin.FinishedAt.Sub(*fin.StartedAt).Milliseconds()
	}
	if fin.Error != nil {
		data["error"] = *fin.Error
	}
	if fin.FailureClass != nil {
		data["failureClass"] = *fin.FailureClass
	}
	if fin.TerminationReason != nil {
		data["terminationReason"] = *fin.TerminationReason
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(parent), events.New{Type: endEvents[fin.Status], Data: data}); err != nil {
		return err
	}
	if parent.Status == run.StatusWaiting && slices.Contains(parent.WaitFor, fin.ID) {
		open, err := tx.Q.SubagentWaitOpen(ctx, dbsqlc.SubagentWaitOpenParams{TenantID: fin.TenantID, ParentRunID: uuid.NullUUID{UUID: parent.ID, Valid: true}, Ids: parent.WaitFor})
		if err != nil {
			return err
		}
		if open == 0 {
			if err := s.resumeParent(ctx, tx, parent, "the sub-agents it waited for ended"); err != nil {
				return err
			}
		}
	}
	return s.requestDispatch(ctx, tx)
}

// Waits reports whether calls of the tool may park the run: wait_subagents.
func (s *Service) Waits(name string) bool { return name == WaitToolName }

// waitArgs are wait_subagents' arguments.
type waitArgs struct {
	IDs            []string `json:"ids,omitempty"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
}

// Wait limits, in seconds.
const (
	DefaultWaitSeconds = 600
	MaxWaitSeconds     = 4 * 3600
)

// Park parks the run WAITING when call (wait_subagents) waits for sub-agents that have not all
// ended and its time is not up: wait_for and wait_until are set, execution.waiting stored, a
// job scheduled at wait_until resumes it then (and a waited child's end resumes it sooner). It
// runs in the run's fenced transaction. Bad arguments do not park: the call then fails and the
// model reads why.
func (s *Service) Park(ctx context.Context, tx *db.Tx, l run.Lease, call dbsqlc.ToolCall) (bool, error) {
	r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: l.Run.TenantID, ID: l.Run.ID})
	if err != nil {
		return false, err
	}
	var args waitArgs
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return false, nil
	}
	ids, err := s.waitIDs(ctx, tx, r, args.IDs)
	if err != nil || len(ids) == 0 {
		return false, nil
	}
	now := time.Now()
	if r.WaitUntil != nil && !now.Before(*r.WaitUntil) {
		return false, nil // this wait's time is up: the call answers with where things stand
	}
	open, err := tx.Q.SubagentWaitOpen(ctx, dbsqlc.SubagentWaitOpenParams{TenantID: r.TenantID, ParentRunID: uuid.NullUUID{UUID: r.ID, Valid: true}, Ids: ids})
	if err != nil {
		return false, err
	}
	if open == 0 {
		return false, nil
	}
	until := r.WaitUntil
	if until == nil {
		secs := args.TimeoutSeconds
		if secs <= 0 {
			secs = DefaultWaitSeconds
		}
		t := now.Add(time.Duration(min(secs, MaxWaitSeconds)) * time.Second)
		until = &t
	}
	p, err := tx.Q.RunSuspendWaiting(ctx, dbsqlc.RunSuspendWaitingParams{TenantID: r.TenantID, ID: r.ID, Attempt: l.Attempt, WaitFor: ids, WaitUntil: *until})
	if db.IsNoRows(err) {
		return false, run.ErrFenced
	}
	if err != nil {
		return false, fmt.Errorf("park run %s: %w", r.ID, err)
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(p), events.New{Type: events.ExecutionWaiting, Data: map[string]any{
		"toolCallId": call.ID, "waitingFor": len(ids), "open": open, "until": until.UTC(),
	}}); err != nil {
		return false, err
	}
	if s.jobs != nil {
		if _, err := s.jobs.InsertTx(ctx, tx.Tx, WaitTimeoutArgs{TenantID: r.TenantID, RunID: r.ID}, &river.InsertOpts{ScheduledAt: *until}); err != nil {
			return false, fmt.Errorf("schedule wait timeout: %w", err)
		}
	}
	if r.Kind == KindSubagent {
		// A waiting sub-agent gives its slot back (its own sub-agents may need it).
		if err := s.requestDispatch(ctx, tx); err != nil {
			return false, err
		}
	}
	return true, nil
}

// waitIDs resolves wait_subagents' ids (its children's; all of them that have not ended when
// none are named). An id that is not one of r's sub-agents is a BAD_USER_INPUT the tool
// reports.
func (s *Service) waitIDs(ctx context.Context, tx *db.Tx, r dbsqlc.Run, given []string) ([]uuid.UUID, error) {
	children, err := tx.Q.SubagentListByParent(ctx, dbsqlc.SubagentListByParentParams{TenantID: r.TenantID, ParentRunID: r.ID})
	if err != nil {
		return nil, err
	}
	if len(given) == 0 {
		var ids []uuid.UUID
		for _, c := range children {
			ids = append(ids, c.ID)
		}
		return ids, nil
	}
	var ids []uuid.UUID
	for _, g := range given {
		id, ok := parseID(g)
		if !ok || !slices.ContainsFunc(children, func(c dbsqlc.Subagent) bool { return c.ID == id }) {
			return nil, apperr.Invalid("ids", "%q is not a sub-agent of this run", g)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// parseID reads a sub-agent id: its uuid, or its global id (base64url of "Subagent:<uuid>").
func parseID(s string) (uuid.UUID, bool) {
	s = strings.TrimSpace(s)
	if id, err := uuid.Parse(s); err == nil {
		return id, true
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return uuid.Nil, false
	}
	typ, rest, ok := strings.Cut(string(raw), ":")
	if !ok || (typ != "Subagent" && typ != "Run") {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(rest)
	return id, err == nil
}
