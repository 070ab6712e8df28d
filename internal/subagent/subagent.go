// Package subagent is the sub-agents of a run: a run of kind SUBAGENT under a parent run, with
// a role (its prompt and tools), a goal, a priority and limits; the tools a model spawns and
// waits for them with (spawn_subagent, wait_subagents); the parent's suspension while it waits;
// and the dispatcher that starts queued sub-agents under the platform, per-tenant and per-parent
// limits, in priority order with the tenants served round robin. See ARCHITECTURE.md.
package subagent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/status"
	"github.com/agentry/agentry/internal/tool"
)

// KindSubagent is the run kind of a sub-agent.
const KindSubagent = "SUBAGENT"

// Status is the status of a sub-agent.
type Status = status.Subagent

// Statuses of a sub-agent (the terminal ones are its run's).
const (
	StatusPending          Status = "PENDING"
	StatusAwaitingApproval Status = "AWAITING_APPROVAL"
	StatusQueued           Status = "QUEUED"
	StatusRunning          Status = "RUNNING"
)

// Ranges and defaults of a sub-agent's settings (the table's CHECK constraints match).
const (
	DefaultPriority       = 5
	DefaultMaxTurns       = 20
	DefaultMaxTokens      = 100_000
	DefaultTimeoutMinutes = 60
	MaxDepth              = 3
	MaxGoalChars          = 20_000
)

// Limits are the dispatcher's: how many sub-agents may hold a slot (QUEUED or RUNNING) at once.
type Limits struct {
	Platform, Tenant, Parent int
}

// DefaultLimits: 200 on the platform (AGENTRY_SUBAGENTS_PLATFORM_MAX), 8 per tenant (used only
// for a tenant whose plan row is missing: a tenant's limit is its plan's subagents_running_max,
// 8 on the default plan), 5 per parent run.
var DefaultLimits = Limits{Platform: 200, Tenant: 8, Parent: 5}

// Asker asks a person about a run without suspending it (approval.Service implements it): the
// approval of a sub-agent's start when its user's subagentApproval is REQUIRED.
type Asker interface {
	Ask(ctx context.Context, tx *db.Tx, r dbsqlc.Run, kind, question string, data map[string]any) (dbsqlc.Approval, error)
}

// ApprovalKind is the kind of the approval a sub-agent's start waits on.
const ApprovalKind = "subagent"

// Admission refuses a new run that no budget can pay for (usage.Service implements it).
type Admission interface {
	Admit(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) error
}

// Service is the sub-agent domain.
type Service struct {
	db     *db.DB
	runs   *run.Service
	tools  *tool.Registry
	jobs   run.Inserter
	admit  Admission
	ask    Asker
	limits Limits
	log    *slog.Logger
}

// NewService returns the service. Its tools (Tools) must be registered in reg, and its jobs
// inserter set (SetInserter) before it spawns.
func NewService(d *db.DB, runs *run.Service, reg *tool.Registry, limits Limits, log *slog.Logger, options ...Option) *Service {
	if limits.Platform <= 0 {
		limits.Platform = DefaultLimits.Platform
	}
	if limits.Tenant <= 0 {
		limits.Tenant = DefaultLimits.Tenant
	}
	if limits.Parent <= 0 {
		limits.Parent = DefaultLimits.Parent
	}
	s := &Service{db: d, runs: runs, tools: reg, limits: limits, log: log}
	for _, o := range options {
		o(s)
	}
	return s
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithAdmission connects budget admission (without: every spawn is admitted).
func WithAdmission(a Admission) Option { return func(s *Service) { s.admit = a } }

// WithApprovals connects the approvals a sub-agent's start may wait on (without: a user whose
// subagentApproval is REQUIRED cannot spawn, CONFLICT).
func WithApprovals(a Asker) Option { return func(s *Service) { s.ask = a } }

// SetInserter sets River's client. It stays a setter: the client is built from the workers,
// which need this service, so it exists only after NewService.
func (s *Service) SetInserter(jobs run.Inserter) { s.jobs = jobs }

// Spawn is what a sub-agent is started with. Zero numbers take the defaults (maxTokens under
// a sub-agent: half of what that one has left, at most the default).
type Spawn struct {
	Role           string
	Goal           string
	Priority       int
	MaxTurns       int
	MaxTokens      int
	TimeoutMinutes int
}

// check fills the defaults and refuses what is out of range, naming the field.
func (in *Spawn) check() error {
	if !slices.Contains(Roles, in.Role) {
		return apperr.Invalid("role", "%q is not a role (one of %s)", in.Role, strings.Join(Roles, ", "))
	}
	in.Goal = strings.TrimSpace(in.Goal)
	if in.Goal == "" {
		return apperr.Invalid("goal", "must not be empty")
	}
	if utf8.RuneCountInString(in.Goal) > MaxGoalChars || !utf8.ValidString(in.Goal) || strings.ContainsRune(in.Goal, 0) {
		return apperr.Invalid("goal", "must be valid text of at most %d characters", MaxGoalChars)
	}
	for _, f := range []struct {
		name     string
		v        *int
		def      int
		min, max int
	}{
		{"priority", &in.Priority, DefaultPriority, 1, 10},
		{"maxTurns", &in.MaxTurns, DefaultMaxTurns, 1, 100},
		{"maxTokens", &in.MaxTokens, DefaultMaxTokens, 1000, 1_000_000},
		{"timeoutMinutes", &in.TimeoutMinutes, DefaultTimeoutMinutes, 1, 240},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < f.min || *f.v > f.max {
			return apperr.Invalid(f.name, "must be between %d and %d (got %d)", f.min, f.max, *f.v)
		}
	}
	return nil
}

// SpawnFor starts a sub-agent under run parentID for a person or an integration
// (spawnSubagent). MEMBER or higher; another tenant's run, or a run the caller cannot see, is
// NOT_FOUND.
func (s *Service) SpawnFor(ctx context.Context, parentID uuid.UUID, in Spawn) (dbsqlc.Subagent, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Subagent{}, err
	}
	if _, err := s.runs.Get(ctx, parentID); err != nil {
		return dbsqlc.Subagent{}, err
	}
	var out dbsqlc.Subagent
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		parent, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: a.TenantID, ID: parentID})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("run")
		}
		if err != nil {
			return err
		}
		out, err = s.spawn(ctx, tx, parent, in, "api")
		return err
	})
	return out, err
}

// spawn starts a sub-agent under parent, which tx holds locked (a worker's fenced transaction,
// or SpawnFor's): the child's conversation, run (QUEUED without a job), goal message and
// subagent row, subagent.spawned on the parent's stream and task.queued on the child's, and a
// dispatch job, all in tx.
func (s *Service) spawn(ctx context.Context, tx *db.Tx, parent dbsqlc.Run, in Spawn, by string) (dbsqlc.Subagent, error) {
	defaultTokens := in.MaxTokens == 0
	if err := in.check(); err != nil {
		return dbsqlc.Subagent{}, err
	}
	if run.IsTerminal(parent.Status) {
		return dbsqlc.Subagent{}, apperr.New(apperr.Conflict, "the run has ended (%s): a sub-agent needs a run that is still going", parent.Status)
	}
	depth := int(parent.Depth) + 1
	if depth > MaxDepth {
		return dbsqlc.Subagent{}, apperr.New(apperr.BadUserInput, "sub-agents nest at most %d deep: this run is at depth %d and cannot start another", MaxDepth, parent.Depth).With("field", "depth")
	}
	if !parent.ConversationID.Valid {
		return dbsqlc.Subagent{}, apperr.New(apperr.Conflict, "this run has no conversation to start a sub-agent from")
	}
	conv, err := tx.Q.ConversationGet(ctx, dbsqlc.ConversationGetParams{TenantID: parent.TenantID, ID: parent.ConversationID.UUID})
	if err != nil {
		return dbsqlc.Subagent{}, fmt.Errorf("load conversation: %w", err)
	}
	var parentTools []string
	if parent.Kind == KindSubagent {
		ps, err := tx.Q.SubagentGet(ctx, dbsqlc.SubagentGetParams{TenantID: parent.TenantID, ID: parent.ID})
		if err != nil {
			return dbsqlc.Subagent{}, fmt.Errorf("load parent sub-agent: %w", err)
		}
		parentTools = ps.Tools
		// The child's max tokens come out of what the parent has left.
		used, err := tx.Q.SubagentAllowanceUsed(ctx, dbsqlc.SubagentAllowanceUsedParams{TenantID: parent.TenantID, ParentRunID: parent.ID})
		if err != nil {
			return dbsqlc.Subagent{}, err
		}
		left := int64(ps.MaxTokens) - parent.InputTokens - parent.OutputTokens - used
		if defaultTokens {
			// Unless told, a sub-agent's sub-agent gets half of what its parent has left.
			in.MaxTokens = int(max(min(left/2, DefaultMaxTokens), 1000))
		}
		if int64(in.MaxTokens) > left {
			return dbsqlc.Subagent{}, apperr.New(apperr.BudgetExceeded, "maxTokens %d is more than this sub-agent has left to give (%d tokens)", in.MaxTokens, max(left, 0)).With("field", "maxTokens")
		}
	}
	if s.admit != nil {
		if err := s.admit.Admit(ctx, tx, parent.TenantID, parent.UserID); err != nil {
			return dbsqlc.Subagent{}, err
		}
	}
	set, err := settings.ForUserID(ctx, tx, parent.TenantID, parent.UserID)
	if err != nil {
		return dbsqlc.Subagent{}, err
	}
	approve := set.SubagentApproval == settings.SubagentApprovalRequired
	if approve && s.ask == nil {
		return dbsqlc.Subagent{}, apperr.New(apperr.Conflict, "sub-agents need approval (subagentApproval REQUIRED) and approvals are not available here")
	}
	tools := toolsFor(s.tools, in.Role, parentTools)
	// Its run is QUEUED without a job until the dispatcher gives it a slot.
	own, err := s.runs.CreateOwn(ctx, tx, run.Own{
		TenantID: parent.TenantID, UserID: parent.UserID, ProjectID: conv.ProjectID, ConversationKind: "TASK",
		Title: in.Role + ": " + truncate(in.Goal, 200), Model: conv.Model, SystemPrompt: Prompt(in.Role), GoesWithRun: true,
		Kind: KindSubagent, ParentRunID: uuid.NullUUID{UUID: parent.ID, Valid: true}, Depth: int32(depth),
		MaxAttempts: int32(set.MaxRetries + 1), Prompt: in.Goal, Queued: map[string]any{"parentRunId": parent.ID},
	})
	if err != nil {
		return dbsqlc.Subagent{}, err
	}
	r, runID := own.Run, own.Run.ID
	status := StatusPending
	if approve {
		status = StatusAwaitingApproval
	}
	sa, err := tx.Q.SubagentInsert(ctx, dbsqlc.SubagentInsertParams{
		TenantID: parent.TenantID, ID: runID, ParentRunID: parent.ID, Role: in.Role, Goal: in.Goal, Status: status,
		Priority: int32(in.Priority), Depth: int32(depth), MaxTurns: int32(in.MaxTurns), MaxTokens: int32(in.MaxTokens),
		TimeoutMinutes: int32(in.TimeoutMinutes), Tools: tools,
	})
	if err != nil {
		return dbsqlc.Subagent{}, fmt.Errorf("insert sub-agent: %w", err)
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(parent), events.New{Type: events.SubagentSpawned, Data: eventData(sa, map[string]any{
		"goal": truncate(in.Goal, 500), "tools": tools, "by": by, "maxTurns": in.MaxTurns, "maxTokens": in.MaxTokens, "timeoutMinutes": in.TimeoutMinutes,
	})}); err != nil {
		return dbsqlc.Subagent{}, err
	}
	if approve {
		return sa, s.askApproval(ctx, tx, parent, r, sa)
	}
	if err := s.requestDispatch(ctx, tx); err != nil {
		return dbsqlc.Subagent{}, err
	}
	return sa, nil
}

// askApproval asks the sub-agent's user whether sa (whose run is r) may start: an approval of
// kind subagent on the sub-agent's own run, and subagent.awaiting_approval on the parent's
// stream (with the approval's id and deadline). No dispatch is requested: the dispatcher only
// starts it once approved (Decided).
func (s *Service) askApproval(ctx context.Context, tx *db.Tx, parent, r dbsqlc.Run, sa dbsqlc.Subagent) error {
	q := fmt.Sprintf("May a %s sub-agent start on this goal? %s", strings.ToLower(sa.Role), truncate(sa.Goal, 2000))
	ap, err := s.ask.Ask(ctx, tx, r, ApprovalKind, q, map[string]any{
		"subagentId": sa.ID, "parentRunId": parent.ID, "role": sa.Role, "priority": sa.Priority, "maxTokens": sa.MaxTokens,
	})
	if err != nil {
		return fmt.Errorf("ask approval of sub-agent %s: %w", sa.ID, err)
	}
	_, err = s.runs.Publisher().Append(ctx, tx, run.ScopeOf(parent), events.New{Type: events.SubagentAwaitingApproval, Data: eventData(sa, map[string]any{
		"approvalId": ap.ID, "expiresAt": ap.ExpiresAt, "goal": truncate(sa.Goal, 500),
	})})
	return err
}

// Decided is the approval.DecisionHook of kind subagent, in resolveApproval's transaction
// (which holds the sub-agent's run locked): APPROVE makes the sub-agent PENDING and asks for a
// dispatcher pass; REJECT cancels it (its end is reported to the parent like any cancel, with
// the reason). A sub-agent that no longer waits (cancelled with its parent) is CONFLICT.
func (s *Service) Decided(ctx context.Context, tx *db.Tx, ap dbsqlc.Approval) error {
	if ap.Status == "APPROVED" {
		if _, err := tx.Q.SubagentApproved(ctx, dbsqlc.SubagentApprovedParams{TenantID: ap.TenantID, ID: ap.RunID}); db.IsNoRows(err) {
			return apperr.New(apperr.Conflict, "the sub-agent no longer waits for approval")
		} else if err != nil {
			return fmt.Errorf("approve sub-agent %s: %w", ap.RunID, err)
		}
		return s.requestDispatch(ctx, tx)
	}
	reason := "its start was rejected"
	if ap.Note != nil {
		reason += ": " + *ap.Note
	}
	return s.refuse(ctx, tx, ap, reason)
}

// Expired is the approval.ExpiryHook of kind subagent: nobody approved the start in time, so
// the sub-agent ends CANCELLED (the parent is told like for a rejection).
func (s *Service) Expired(ctx context.Context, tx *db.Tx, ap dbsqlc.Approval, r dbsqlc.Run) ([]events.New, error) {
	if run.IsTerminal(r.Status) {
		return nil, nil // it ended meanwhile (cancelled with its parent)
	}
	return nil, s.refuse(ctx, tx, ap, "its start was not approved before the approval expired")
}

// refuse cancels the sub-agent ap asked about when it still waits for approval.
func (s *Service) refuse(ctx context.Context, tx *db.Tx, ap dbsqlc.Approval, reason string) error {
	sa, err := tx.Q.SubagentGetForUpdate(ctx, dbsqlc.SubagentGetForUpdateParams{TenantID: ap.TenantID, ID: ap.RunID})
	if err != nil {
		return fmt.Errorf("load sub-agent %s: %w", ap.RunID, err)
	}
	if sa.Status != StatusAwaitingApproval {
		return apperr.New(apperr.Conflict, "the sub-agent no longer waits for approval (it is %s)", sa.Status)
	}
	r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: ap.TenantID, ID: ap.RunID})
	if err != nil {
		return fmt.Errorf("lock sub-agent run %s: %w", ap.RunID, err)
	}
	return s.runs.CancelTx(ctx, tx, r, reason)
}

// eventData is the data of a subagent.* event: the sub-agent (its id is its run's), its role
// and priority, and more.
func eventData(sa dbsqlc.Subagent, more map[string]any) map[string]any {
	d := map[string]any{"subagentId": sa.ID, "childRunId": sa.ID, "role": sa.Role, "priority": sa.Priority, "depth": sa.Depth}
	for k, v := range more {
		d[k] = v
	}
	return d
}

// requestDispatch enqueues a dispatcher pass in tx (after a spawn, or a slot freed). A pass
// that waits for a worker is enough: a job inserted in tx is seen only once tx commits, so that
// pass reads what tx wrote, and the request collapses into it (River's unique jobs). A pass
// already running may not: then the request is the other key's pass (Again), inserted once tx
// has committed in a transaction of its own, because a unique insert locks the pass it
// collapses into, and a transaction holding the running pass's row while it waited for the
// other key's deadlocked against River's completer (which finishes both). When both are
// running, the next request or the periodic pass (DispatchEvery) starts what they missed.
func (s *Service) requestDispatch(ctx context.Context, tx *db.Tx) error {
	if s.jobs == nil {
		return nil
	}
	res, err := s.jobs.InsertTx(ctx, tx.Tx, DispatchArgs{}, nil)
	if err != nil {
		return fmt.Errorf("enqueue sub-agent dispatch: %w", err)
	}
	if !res.UniqueSkippedAsDuplicate || res.Job == nil || res.Job.State != rivertype.JobStateRunning {
		return nil
	}
	ctx = db.Detach(context.WithoutCancel(ctx))
	tx.AfterCommit(func() {
		err := s.db.InSystemTx(ctx, "sub-agent dispatch request: River's tables belong to no tenant", func(ctx context.Context, tx *db.Tx) error {
			_, err := s.jobs.InsertTx(ctx, tx.Tx, DispatchArgs{Again: true}, nil)
			return err
		})
		if err != nil {
			s.log.WarnContext(ctx, "request a sub-agent dispatch pass (the periodic pass makes up for it)", slog.Any("error", err))
		}
	})
	return nil
}

// Get returns a sub-agent of the caller's tenant whose parent run the caller can see.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (dbsqlc.Subagent, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Subagent{}, err
	}
	var sa dbsqlc.Subagent
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		sa, err = tx.Q.SubagentGet(ctx, dbsqlc.SubagentGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return sa, apperr.NotFoundf("sub-agent")
	}
	if err != nil {
		return sa, err
	}
	if _, err := s.runs.Get(ctx, sa.ParentRunID); err != nil {
		return sa, apperr.NotFoundf("sub-agent")
	}
	return sa, nil
}

// Cancel cancels a sub-agent and its own sub-agents (cancelSubagent): run.Service.Cancel on its
// run. MEMBER or higher; one that has ended is CONFLICT.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID) (dbsqlc.Subagent, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return dbsqlc.Subagent{}, err
	}
	if _, err := s.runs.Cancel(ctx, id); err != nil {
		return dbsqlc.Subagent{}, err
	}
	return s.Get(ctx, id)
}

// ListByParents returns the sub-agents of each run of parents (the caller checked it may see
// them), oldest first.
func (s *Service) ListByParents(ctx context.Context, tenantID uuid.UUID, parents []uuid.UUID) (map[uuid.UUID][]dbsqlc.Subagent, error) {
	out := map[uuid.UUID][]dbsqlc.Subagent{}
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.SubagentListByParents(ctx, dbsqlc.SubagentListByParentsParams{TenantID: tenantID, ParentIds: parents})
		for _, r := range rows {
			out[r.ParentRunID] = append(out[r.ParentRunID], r)
		}
		return err
	})
	return out, err
}

// ByParents returns the sub-agents of each of the caller's tenant's runs among parents, oldest
// first (the Run.subagents loader; the caller's access to each parent was checked when it was
// read).
func (s *Service) ByParents(ctx context.Context, parents []uuid.UUID) (map[uuid.UUID][]dbsqlc.Subagent, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	return s.ListByParents(ctx, a.TenantID, parents)
}

// TreeUsageByRuns is TreeUsage of each of the caller's tenant's runs among ids, in one query
// (the Run.total* loader). A run missing from the map has no usage the caller may see.
func (s *Service) TreeUsageByRuns(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]dbsqlc.RunTreeUsageByIDsRow, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]dbsqlc.RunTreeUsageByIDsRow, len(ids))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.RunTreeUsageByIDs(ctx, dbsqlc.RunTreeUsageByIDsParams{TenantID: a.TenantID, Ids: ids})
		for _, r := range rows {
			out[r.RunID] = r
		}
		return err
	})
	return out, err
}

// resumeParent makes a WAITING parent workable again in tx (which holds its row lock): QUEUED
// with a new attempt, execution.resumed, and its continuation job. Its conversation already
// names it as the active run, so it is not touched (a child's end never locks its parent's
// conversation). A parent that is itself a sub-agent gave its slot back while it waited: it
// is PENDING again, without a job, and the dispatcher gives it a slot and its job like any
// pending sub-agent (so a resumed one never takes its tenant, parent or the platform over
// their limits).
func (s *Service) resumeParent(ctx context.Context, tx *db.Tx, p dbsqlc.Run, reason string) error {
	r, err := tx.Q.RunRequeue(ctx, dbsqlc.RunRequeueParams{TenantID: p.TenantID, ID: p.ID, FromStatuses: []string{string(run.StatusWaiting)}})
	if db.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("requeue waiting run %s: %w", p.ID, err)
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), events.New{Type: events.ExecutionResumed, Data: map[string]any{"reason": reason}}); err != nil {
		return err
	}
	if r.Kind == KindSubagent {
		if _, err := tx.Q.SubagentRequeue(ctx, dbsqlc.SubagentRequeueParams{TenantID: r.TenantID, ID: r.ID}); err != nil {
			return fmt.Errorf("requeue sub-agent %s: %w", r.ID, err)
		}
		return s.requestDispatch(ctx, tx)
	}
	jobID, err := s.runs.InsertJob(ctx, tx, r.TenantID, r.ID, r.Kind, r.MaxAttempts)
	if err != nil {
		return err
	}
	return tx.Q.RunSetJob(ctx, dbsqlc.RunSetJobParams{TenantID: r.TenantID, ID: r.ID, JobID: &jobID})
}

// WaitTimeoutArgs resumes a waiting run when its wait's time is up.
type WaitTimeoutArgs struct {
	TenantID uuid.UUID `json:"tenant_id"`
	RunID    uuid.UUID `json:"run_id"`
}

// Kind names the job.
func (WaitTimeoutArgs) Kind() string { return "subagent_wait_timeout" }

// InsertOpts puts the job on the maintenance queue.
func (WaitTimeoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: run.QueueMaintenance, MaxAttempts: 5}
}

// WaitTimeoutWorker works WaitTimeoutArgs.
type WaitTimeoutWorker struct {
	river.WorkerDefaults[WaitTimeoutArgs]
	s *Service
}

// Work resumes the run when it still waits and its wait is over.
func (w *WaitTimeoutWorker) Work(ctx context.Context, job *river.Job[WaitTimeoutArgs]) error {
	a := job.Args
	return w.s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		p, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: a.TenantID, ID: a.RunID})
		if db.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.Status != run.StatusWaiting || p.WaitUntil == nil || p.WaitUntil.After(time.Now()) {
			return nil
		}
		return w.s.resumeParent(ctx, tx, p, "the wait for sub-agents timed out")
	})
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
