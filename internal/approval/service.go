package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
)

// DefaultTTL is how long an approval waits for a person when NewService is given no ttl.
const DefaultTTL = 24 * time.Hour

// MaxNoteLength bounds the note a person gives with a decision (characters).
const MaxNoteLength = 2000

// MaxQuestionLength bounds a stored question (characters); Request shortens longer ones.
const MaxQuestionLength = 10000

// expireBatch is how many due approvals ExpireDue lists at a time.
const expireBatch = 200

// Service asks people and records their decisions.
type Service struct {
	db   *db.DB
	runs *run.Service
	ttl  time.Duration
	log  *slog.Logger
	// clock is what now reads (SetClock); nil: time.Now.
	clock atomic.Pointer[func() time.Time]
	// onExpire decides, per kind, what an expired question means (OnExpire).
	onExpire map[string]ExpiryHook
	// onDecision holds, per kind asked of an ended run, what a decision does (Resolve).
	onDecision map[string]DecisionHook
}

// ExpiryHook is told, inside the transaction that marks approval a EXPIRED, that a question of
// its kind expired on run r (locked); it records what the expiry decides and returns the events
// saying so, appended after approval.resolved.
type ExpiryHook func(ctx context.Context, tx *db.Tx, a dbsqlc.Approval, r dbsqlc.Run) ([]events.New, error)

// OnExpire makes h decide what an expired question of kind means (the rollback question: the
// run's changes are kept). Register hooks before the service is used.
func (s *Service) OnExpire(kind string, h ExpiryHook) {
	if s.onExpire == nil {
		s.onExpire = map[string]ExpiryHook{}
	}
	s.onExpire[kind] = h
}

// DecisionHook applies a decision on an approval asked of an ended run (decided is the
// approval as decided), inside Resolve's transaction; it appends its own events.
type DecisionHook func(ctx context.Context, tx *db.Tx, decided dbsqlc.Approval) error

// OnDecision registers what a decision on an approval of kind does when its run has ended
// (a team_blocked question). Call it while wiring.
func (s *Service) OnDecision(kind string, h DecisionHook) {
	if s.onDecision == nil {
		s.onDecision = map[string]DecisionHook{}
	}
	s.onDecision[kind] = h
}

// NewService returns the approval service. Approvals expire ttl after they are asked (0 means
// DefaultTTL).
func NewService(d *db.DB, runs *run.Service, ttl time.Duration, log *slog.Logger) *Service {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Service{db: d, runs: runs, ttl: ttl, log: log}
}

// SetClock replaces the clock every deadline is set and compared with (tests move it instead of
// waiting for an approval to expire). Safe while the service runs, so tests move the clock of a
// running process.
func (s *Service) SetClock(now func() time.Time) { s.clock.Store(&now) }

// now is the service's clock.
func (s *Service) now() time.Time {
	if c := s.clock.Load(); c != nil {
		return (*c)()
	}
	return time.Now()
}

// TTL is how long an approval waits for a person.
func (s *Service) TTL() time.Duration { return s.ttl }

// Request is a question to a person.
type Request struct {
	// Kind is one of the Kind constants.
	Kind string
	// ToolCall is the call asked about: required for KindToolCall, nil for continue and
	// escalation.
	ToolCall *dbsqlc.ToolCall
	// Question is what the person reads.
	Question string
	// Data is kept with the approval and added to the approval.requested event (for example
	// {"turns": 20} for a long-task confirmation). The event's own fields win over same-named
	// keys.
	Data map[string]any
}

// Request runs inside the executor's fenced transaction tx for lease l: it inserts a PENDING
// approval (for a tool call: the call's id, name and ArgsHash; expiring now+ttl; the question
// cut to MaxQuestionLength), appends approval.requested (data: approvalId, kind, question,
// toolCallId, toolName, arguments, risk, expiresAt and req.Data) and suspends the run
// AWAITING_APPROVAL, ending its job. It returns run.ErrFenced when the lease is stale.
func (s *Service) Request(ctx context.Context, tx *db.Tx, l run.Lease, req Request) (dbsqlc.Approval, error) {
	if !ValidKind(req.Kind) {
		return dbsqlc.Approval{}, fmt.Errorf("approval kind %q is not one of tool_call, continue, rollback, escalation", req.Kind)
	}
	if req.Kind == KindToolCall && req.ToolCall == nil {
		return dbsqlc.Approval{}, fmt.Errorf("a tool_call approval needs its tool call")
	}
	r := l.Run
	if q := []rune(req.Question); len(q) > MaxQuestionLength {
		req.Question = string(q[:MaxQuestionLength-1]) + "…"
	}
	now := s.now().UTC()
	p := dbsqlc.ApprovalInsertParams{
		TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: r.ID, Kind: req.Kind,
		Question: nonEmpty(req.Question), CreatedAt: now, ExpiresAt: now.Add(s.ttl), Data: []byte("{}"),
	}
	ev := map[string]any{}
	for k, v := range req.Data {
		ev[k] = v
	}
	if len(req.Data) > 0 {
		data, err := json.Marshal(req.Data)
		if err != nil {
			return dbsqlc.Approval{}, fmt.Errorf("marshal approval data: %w", err)
		}
		p.Data = data
	}
	if c := req.ToolCall; c != nil {
		if c.TenantID != r.TenantID || c.RunID != r.ID {
			return dbsqlc.Approval{}, fmt.Errorf("tool call %s is not of run %s", c.ID, r.ID)
		}
		hash, err := ArgsHash(c.Name, c.Arguments)
		if err != nil {
			return dbsqlc.Approval{}, fmt.Errorf("hash arguments of tool call %s: %w", c.ID, err)
		}
		p.ToolCallID, p.ToolName, p.ArgsHash = uuid.NullUUID{UUID: c.ID, Valid: true}, &c.Name, hash
		ev["toolCallId"], ev["toolName"], ev["arguments"], ev["risk"] = c.ID, c.Name, json.RawMessage(argsOrEmpty(c.Arguments)), c.Risk
	}
	a, err := tx.Q.ApprovalInsert(ctx, p)
	if db.IsUniqueViolation(err, "approvals_one_pending_key") {
		return a, fmt.Errorf("run %s already waits on an approval", r.ID)
	}
	if err != nil {
		return a, fmt.Errorf("insert approval: %w", err)
	}
	ev["approvalId"], ev["kind"], ev["question"], ev["expiresAt"] = a.ID, a.Kind, req.Question, a.ExpiresAt
	if _, err := s.runs.Suspend(ctx, tx, l, run.StatusAwaitingApproval, events.New{Type: events.ApprovalRequested, Data: ev}); err != nil {
		return a, err
	}
	s.log.InfoContext(ctx, "approval requested", "tenant_id", r.TenantID.String(), "run_id", r.ID.String(),
		"approval_id", a.ID.String(), "kind", a.Kind)
	return a, nil
}

// ForToolCall returns the newest approval of a tool call (found false when none was asked).
// The executor runs the call only when Permits(approval, call).
func (s *Service) ForToolCall(ctx context.Context, tx *db.Tx, tenantID, toolCallID uuid.UUID) (dbsqlc.Approval, bool, error) {
	a, err := tx.Q.ApprovalLatestByToolCall(ctx, dbsqlc.ApprovalLatestByToolCallParams{TenantID: tenantID, ToolCallID: uuid.NullUUID{UUID: toolCallID, Valid: true}})
	if db.IsNoRows(err) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("approval of tool call %s: %w", toolCallID, err)
	}
	return a, true, nil
}

// Latest returns the newest approval of the given kind asked by a run (found false when none
// was), for continue and escalation questions.
func (s *Service) Latest(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind string) (dbsqlc.Approval, bool, error) {
	a, err := tx.Q.ApprovalLatestByRun(ctx, dbsqlc.ApprovalLatestByRunParams{TenantID: tenantID, RunID: runID, Kind: kind})
	if db.IsNoRows(err) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("latest %s approval of run %s: %w", kind, runID, err)
	}
	return a, true, nil
}

// Resolve records a person's decision (APPROVE or REJECT, with an optional note) on one of
// the caller's tenant's approvals, for resolveApproval. It needs MEMBER or higher. Another
// tenant's approval, or a missing one, is NOT_FOUND; an approval already decided is CONFLICT.
// An approval past its deadline is CONFLICT too ("expired"), and is marked EXPIRED with its run
// resumed, so the run moves on without running anything. Otherwise the approval becomes
// APPROVED or REJECTED (decided_by, decided_at, note), approval.resolved is appended and the
// run resumed (a continuation job enqueued), all in one transaction.
func (s *Service) Resolve(ctx context.Context, id uuid.UUID, decision string, note string) (dbsqlc.Approval, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Approval{}, err
	}
	var status Status
	switch decision {
	case DecisionApprove:
		status = StatusApproved
	case DecisionReject:
		status = StatusRejected
	default:
		return dbsqlc.Approval{}, apperr.Invalid("decision", "must be APPROVE or REJECT")
	}
	if n := len([]rune(note)); n > MaxNoteLength {
		return dbsqlc.Approval{}, apperr.Invalid("note", "must be at most %d characters", MaxNoteLength)
	}
	var out dbsqlc.Approval
	expired := false
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		cur, err := tx.Q.ApprovalGetForUpdate(ctx, dbsqlc.ApprovalGetForUpdateParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("approval")
		}
		if err != nil {
			return fmt.Errorf("load approval %s: %w", id, err)
		}
		out = cur
		if cur.Kind == KindRollback {
			return apperr.Invalid("id", "is a rollback question (what to do with a failed run's changes): answer it with resolveRollback(approvalId, choice: ROLLBACK, KEEP or CONTINUE)")
		}
		owner, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: a.TenantID, ID: cur.RunID})
		if err != nil {
			return fmt.Errorf("load run %s: %w", cur.RunID, err)
		}
		if err := run.MayControl(ctx, tx, a, owner, "decide approvals of"); err != nil {
			return err
		}
		switch cur.Status {
		case StatusPending:
		case StatusExpired:
			return expiredError(cur)
		default:
			return apperr.New(apperr.Conflict, "this approval was already decided: %s", cur.Status).With("status", cur.Status)
		}
		now := s.now().UTC()
		if !now.Before(cur.ExpiresAt) {
			expired = true
			out, err = s.expireTx(ctx, tx, cur, now)
			return err
		}
		r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: a.TenantID, ID: cur.RunID})
		if err != nil {
			return fmt.Errorf("load run %s: %w", cur.RunID, err)
		}
		if h := s.onDecision[cur.Kind]; h != nil {
			out, err = tx.Q.ApprovalDecide(ctx, dbsqlc.ApprovalDecideParams{
				TenantID: a.TenantID, ID: id, Status: status, DecidedAt: now,
				DecidedBy: uuid.NullUUID{UUID: a.UserID, Valid: true}, Note: nonEmpty(note),
			})
			if err != nil {
				return fmt.Errorf("decide approval %s: %w", id, err)
			}
			// The run is not waiting on it: the hook says what happens next (and its events).
			if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), resolvedEvents(out)[:1]...); err != nil {
				return err
			}
			return h(ctx, tx, out)
		}
		if r.Status != run.StatusAwaitingApproval {
			// The run ended (cancelled, stopped) while it waited: nothing is left to decide.
			return apperr.New(apperr.Conflict, "the run no longer waits for this approval (it is %s)", r.Status).With("runStatus", r.Status)
		}
		out, err = tx.Q.ApprovalDecide(ctx, dbsqlc.ApprovalDecideParams{
			TenantID: a.TenantID, ID: id, Status: status, DecidedAt: now,
			DecidedBy: uuid.NullUUID{UUID: a.UserID, Valid: true}, Note: nonEmpty(note),
		})
		if err != nil {
			return fmt.Errorf("decide approval %s: %w", id, err)
		}
		_, err = s.runs.Resume(ctx, tx, a.TenantID, r.ID, run.StatusAwaitingApproval, resolvedEvents(out)...)
		return err
	})
	if err != nil {
		return out, err
	}
	if expired {
		return out, expiredError(out)
	}
	s.log.InfoContext(ctx, "approval resolved", "tenant_id", a.TenantID.String(), "run_id", out.RunID.String(),
		"approval_id", out.ID.String(), "status", out.Status, "user_id", a.UserID.String())
	return out, nil
}

func expiredError(a dbsqlc.Approval) error {
	return apperr.New(apperr.Conflict, "this approval expired at %s; nothing was run", a.ExpiresAt.UTC().Format(time.RFC3339)).With("status", StatusExpired)
}

// expireTx marks the pending approval cur (locked by the caller) EXPIRED and lets its run move
// on: a run still waiting is resumed (its executor then treats the question as declined). A
// run that already ended gets no event, since nothing may follow its terminal event, except
// for a question about the ended run (the rollback question), whose kind's ExpiryHook decides:
// approval.resolved and the hook's events (state.kept) follow the terminal event then.
func (s *Service) expireTx(ctx context.Context, tx *db.Tx, cur dbsqlc.Approval, now time.Time) (dbsqlc.Approval, error) {
	r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: cur.TenantID, ID: cur.RunID})
	if err != nil {
		return cur, fmt.Errorf("load run %s: %w", cur.RunID, err)
	}
	out, err := tx.Q.ApprovalDecide(ctx, dbsqlc.ApprovalDecideParams{TenantID: cur.TenantID, ID: cur.ID, Status: StatusExpired, DecidedAt: now})
	if err != nil {
		return cur, fmt.Errorf("expire approval %s: %w", cur.ID, err)
	}
	var decided []events.New
	hook := s.onExpire[cur.Kind]
	switch {
	case r.Status == run.StatusAwaitingApproval:
		if hook != nil {
			if decided, err = hook(ctx, tx, out, r); err != nil {
				return out, fmt.Errorf("decide expired %s approval %s: %w", cur.Kind, cur.ID, err)
			}
		}
		_, err = s.runs.Resume(ctx, tx, r.TenantID, r.ID, run.StatusAwaitingApproval, append(resolvedEvents(out), decided...)...)
	case hook != nil:
		// A question about a run that does not wait on it (an ended run, a sub-agent waiting to
		// start): approval.resolved, then what the hook decides (which may end the run).
		if _, err = s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), resolvedEvents(out)[:1]...); err != nil {
			return out, err
		}
		if decided, err = hook(ctx, tx, out, r); err != nil {
			return out, fmt.Errorf("decide expired %s approval %s: %w", cur.Kind, cur.ID, err)
		}
		if len(decided) > 0 {
			_, err = s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), decided...)
		}
	case !run.IsTerminal(r.Status):
		_, err = s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), resolvedEvents(out)[:1]...)
	}
	if err != nil {
		return out, err
	}
	s.log.InfoContext(ctx, "approval expired", "tenant_id", cur.TenantID.String(), "run_id", cur.RunID.String(),
		"approval_id", cur.ID.String(), "run_status", r.Status)
	return out, nil
}

// resolvedEvents are the events of a run whose approval a was decided (or expired):
// approval.resolved, then execution.resumed.
func resolvedEvents(a dbsqlc.Approval) []events.New {
	data := map[string]any{"approvalId": a.ID, "kind": a.Kind, "status": a.Status, "decidedAt": a.DecidedAt}
	if a.ToolCallID.Valid {
		data["toolCallId"] = a.ToolCallID.UUID
	}
	if a.ToolName != nil {
		data["toolName"] = *a.ToolName
	}
	if a.Note != nil {
		data["note"] = *a.Note
	}
	if a.DecidedBy.Valid {
		data["decidedBy"] = a.DecidedBy.UUID
	}
	return []events.New{
		{Type: events.ApprovalResolved, Data: data},
		{Type: events.ExecutionResumed, Data: map[string]any{"reason": "approval " + a.Status, "approvalId": a.ID}},
	}
}

// ExpireDue marks every PENDING approval whose deadline passed EXPIRED, across tenants (found
// in a system transaction, then each handled in its tenant's own transaction), appends
// approval.resolved (status EXPIRED) and resumes each waiting run; the executor then treats
// the question as not approved. It returns how many approvals it expired. One approval that
// fails is logged and left for the next sweep.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	n := 0
	failed := map[uuid.UUID]bool{}
	for {
		now := s.now().UTC()
		var due []dbsqlc.ApprovalListDueRow
		err := s.db.InSystemTx(ctx, "approval expiry: find pending approvals of every tenant past their deadline", func(ctx context.Context, tx *db.Tx) error {
			var err error
			due, err = tx.Q.ApprovalListDue(ctx, dbsqlc.ApprovalListDueParams{Now: now, Lim: expireBatch})
			return err
		})
		if err != nil {
			return n, fmt.Errorf("list due approvals: %w", err)
		}
		progress := false
		for _, d := range due {
			if failed[d.ID] {
				continue
			}
			done := false
			err := s.db.InTx(ctx, d.TenantID, func(ctx context.Context, tx *db.Tx) error {
				cur, err := tx.Q.ApprovalGetForUpdate(ctx, dbsqlc.ApprovalGetForUpdateParams(d))
				if err != nil {
					return fmt.Errorf("load approval %s: %w", d.ID, err)
				}
				if cur.Status != StatusPending || now.Before(cur.ExpiresAt) {
					return nil // decided meanwhile
				}
				_, err = s.expireTx(ctx, tx, cur, now)
				done = err == nil
				return err
			})
			if err != nil {
				if ctx.Err() != nil {
					return n, ctx.Err()
				}
				failed[d.ID] = true
				s.log.WarnContext(ctx, "expire approval", "tenant_id", d.TenantID.String(), "approval_id", d.ID.String(), "error", err)
				continue
			}
			progress = true
			if done {
				n++
			}
		}
		if len(due) < expireBatch || !progress {
			return n, nil
		}
	}
}

// ListByRun returns a run's approvals in the order they were asked (VIEWER or higher; another
// tenant's run has none).
func (s *Service) ListByRun(ctx context.Context, runID uuid.UUID) ([]dbsqlc.Approval, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Approval
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ApprovalListByRun(ctx, dbsqlc.ApprovalListByRunParams{TenantID: a.TenantID, RunID: runID})
		return err
	})
	return out, err
}

// Page selects approvals for List.
type Page struct {
	Status string    // "": any status
	After  uuid.UUID // uuid.Nil: from the newest
	Limit  int
}

// List returns the tenant's approvals, newest first, for an inbox: every run's for ADMIN and
// above, those of the caller's own runs otherwise.
func (s *Service) List(ctx context.Context, p Page) ([]dbsqlc.Approval, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var user uuid.NullUUID
	if !a.Role.AtLeast(auth.RoleAdmin) {
		user = uuid.NullUUID{UUID: a.UserID, Valid: true}
	}
	var out []dbsqlc.Approval
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ApprovalListPage(ctx, dbsqlc.ApprovalListPageParams{
			TenantID: a.TenantID, After: p.After, Status: nonEmpty(p.Status), UserID: user, Lim: int32(p.Limit),
		})
		return err
	})
	return out, err
}

// Get returns one of the caller's tenant's approvals (VIEWER or higher); any other is
// NOT_FOUND.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (dbsqlc.Approval, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Approval{}, err
	}
	var out dbsqlc.Approval
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ApprovalGet(ctx, dbsqlc.ApprovalGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("approval")
	}
	return out, err
}

// ToolCall returns the tool call approval ap asks about (found false for approvals of no
// call), in the caller's tenant (VIEWER or higher).
func (s *Service) ToolCall(ctx context.Context, ap dbsqlc.Approval) (dbsqlc.ToolCall, bool, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil || !ap.ToolCallID.Valid {
		return dbsqlc.ToolCall{}, false, err
	}
	var out dbsqlc.ToolCall
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ApprovalGetToolCall(ctx, dbsqlc.ApprovalGetToolCallParams{TenantID: a.TenantID, ID: ap.ToolCallID.UUID})
		return err
	})
	if db.IsNoRows(err) {
		return out, false, nil
	}
	return out, err == nil, err
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func argsOrEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
