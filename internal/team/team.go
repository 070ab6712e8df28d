// Package team runs teams: an Architect plans, an Executor implements, a Reviewer judges, until
// the reviewer approves. A team run is a run of kind TEAM; each phase (phase x iteration) is a
// run of kind TEAM_PHASE, worked by the executor like any run, in a conversation of its own with
// the phase's model, system prompt, tools and turn limit. See ARCHITECTURE.md.
package team

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/task"
	"github.com/agentry/agentry/internal/workspace"
)

// KindPhase is the run kind of a team phase (the team run itself is run.KindTeam).
const KindPhase = "TEAM_PHASE"

// Phases of a team run.
const (
	PhaseArchitect = "ARCHITECT"
	PhaseExecutor  = "EXECUTOR"
	PhaseReviewer  = "REVIEWER"
)

// Verdicts a reviewer gives through submit_review.
const (
	VerdictApprove        = "APPROVE"
	VerdictRequestChanges = "REQUEST_CHANGES"
	VerdictBlock          = "BLOCK"
)

// Termination reasons of a team run.
const (
	ReasonApproved      = "approved"
	ReasonBlocked       = "blocked"
	ReasonMaxIterations = "max_iterations"
	ReasonNoVerdict     = "no_verdict"
	ReasonBudget        = "budget"
	ReasonTimeout       = "timeout"
	ReasonPhaseFailed   = "phase_failed"
	ReasonCancelled     = "cancelled"
	ReasonStopped       = "user_stop" // stopRun on the team run, as for any run
)

// Event types of a team run (on the TEAM run's events).
const (
	EventRunStarted     = "team.run.started"
	EventPhaseStarted   = "team.phase.started"
	EventPhaseCompleted = "team.phase.completed"
	EventReviewDecision = "team.review.decision"
	EventRunCompleted   = "team.run.completed"
	EventRunFailed      = "team.run.failed"
)

// Input limits; the tables' CHECK constraints match.
const (
	MaxGoalChars      = 20_000
	MaxIterations     = 10
	MaxTimeoutMinutes = 240
	MinTokenBudget    = 1000
	MaxTokenBudget    = 10_000_000
	MaxPhaseTurns     = 100
)

// Models resolves model references and names the default one.
type Models interface {
	Resolve(ref string) (llm.Provider, llm.Model, error)
	Default() string
}

// Admission refuses a new run that no budget can pay for (usage.Service implements it).
type Admission interface {
	Admit(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) error
}

// Service starts team runs and moves them from phase to phase.
type Service struct {
	db        *db.DB
	runs      *run.Service
	approvals *approval.Service
	workspace *workspace.Service
	models    Models
	admit     Admission
	log       *slog.Logger
	// minute is how long a minute of timeoutMinutes lasts, in nanoseconds (tests shorten it).
	minute atomic.Int64
}

// NewService returns the team service.
func NewService(d *db.DB, runs *run.Service, approvals *approval.Service, ws *workspace.Service, models Models, log *slog.Logger, options ...Option) *Service {
	s := &Service{db: d, runs: runs, approvals: approvals, workspace: ws, models: models, log: log}
	s.minute.Store(int64(time.Minute))
	for _, o := range options {
		o(s)
	}
	return s
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithAdmission connects budget admission (without: every team run is admitted).
func WithAdmission(a Admission) Option { return func(s *Service) { s.admit = a } }

// SetMinute sets how long one minute of a team's timeout lasts (tests: milliseconds). It stays a
// setter: tests shorten it on a process that runs already.
func (s *Service) SetMinute(d time.Duration) { s.minute.Store(int64(d)) }

func (s *Service) minutes(n int) time.Duration {
	return time.Duration(n) * time.Duration(s.minute.Load())
}

// PhaseInput sets one phase's model and turn limit; "" and nil take the defaults (the
// conversation's model, the user's team defaults).
type PhaseInput struct {
	Model    string
	MaxTurns *int
}

// StartInput is startTeamRun's input. Exactly one of ConversationID and TaskID is set; nil
// numbers take the user's team defaults.
type StartInput struct {
	ConversationID, TaskID        uuid.UUID
	Goal                          string
	MaxIterations, TimeoutMinutes *int
	TokenBudget                   *int
	Architect, Executor, Reviewer PhaseInput
}

// Team is a team run with its TEAM run.
type Team struct {
	dbsqlc.TeamRun
	Run dbsqlc.Run
}

func between(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return apperr.Invalid(field, "must be between %d and %d (got %d)", lo, hi, v).With("min", lo).With("max", hi)
	}
	return nil
}

// Start begins a team run (MEMBER or higher): in one transaction it makes the TEAM run (RUNNING
// from the start, the conversation's active run), its team_runs row, team.run.started, and the
// first phase (ARCHITECT, iteration 1) with its run and job. A conversation that has an active
// run is CONFLICT; another tenant's (or another user's) conversation or task is NOT_FOUND.
func (s *Service) Start(ctx context.Context, in StartInput) (Team, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return Team{}, err
	}
	if (in.ConversationID == uuid.Nil) == (in.TaskID == uuid.Nil) {
		return Team{}, apperr.Invalid("input", "give exactly one of conversationId and taskId")
	}
	goal := strings.TrimSpace(in.Goal)
	switch {
	case !utf8.ValidString(goal):
		return Team{}, apperr.Invalid("goal", "must be valid UTF-8")
	case goal == "" && in.TaskID == uuid.Nil:
		return Team{}, apperr.Invalid("goal", "must not be empty")
	case utf8.RuneCountInString(goal) > MaxGoalChars:
		return Team{}, apperr.Invalid("goal", "must be at most %d characters", MaxGoalChars)
	case strings.ContainsRune(goal, 0):
		return Team{}, apperr.Invalid("goal", "must not contain NUL characters")
	}
	for _, p := range []struct {
		name string
		in   PhaseInput
	}{{"architect", in.Architect}, {"executor", in.Executor}, {"reviewer", in.Reviewer}} {
		if p.in.MaxTurns != nil {
			if err := between(p.name+".maxTurns", *p.in.MaxTurns, 1, MaxPhaseTurns); err != nil {
				return Team{}, err
			}
		}
		if p.in.Model != "" {
			if _, _, err := s.models.Resolve(p.in.Model); err != nil {
				return Team{}, apperr.Invalid(p.name+".model", "%s", err.Error())
			}
		}
	}
	for _, n := range []struct {
		name   string
		v      *int
		lo, hi int
	}{
		{"maxIterations", in.MaxIterations, 1, MaxIterations},
		{"timeoutMinutes", in.TimeoutMinutes, 1, MaxTimeoutMinutes},
		{"tokenBudget", in.TokenBudget, MinTokenBudget, MaxTokenBudget},
	} {
		if n.v != nil {
			if err := between(n.name, *n.v, n.lo, n.hi); err != nil {
				return Team{}, err
			}
		}
	}
	var out Team
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		set, err := settings.ForUser(ctx, tx, a)
		if err != nil {
			return err
		}
		def := set.Team
		pick := func(v *int, d int) int {
			if v == nil {
				return d
			}
			return *v
		}
		var conv dbsqlc.Conversation
		taskID := uuid.NullUUID{}
		if in.ConversationID != uuid.Nil {
			conv, err = tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: a.TenantID, ID: in.ConversationID})
			if db.IsNoRows(err) || (err == nil && (conv.UserID != a.UserID || conv.Kind != "CHAT")) {
				return apperr.NotFoundf("conversation")
			}
			if err != nil {
				return err
			}
			if conv.ActiveRunID.Valid {
				return apperr.New(apperr.Conflict, "the conversation has an active run; wait for it or cancel it first").With("activeRunId", conv.ActiveRunID.UUID.String())
			}
		} else {
			t, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: a.TenantID, ID: in.TaskID})
			if db.IsNoRows(err) {
				return apperr.NotFoundf("task")
			}
			if err != nil {
				return err
			}
			if goal == "" {
				goal = task.Prompt(t)
			}
			title := "Team: " + t.Title
			conv, err = tx.Q.ConversationInsertOwn(ctx, dbsqlc.ConversationInsertOwnParams{
				TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), ProjectID: t.ProjectID, UserID: a.UserID, Title: &title,
				Kind: "TASK", Model: s.models.Default(),
			})
			if err != nil {
				return fmt.Errorf("insert team conversation: %w", err)
			}
			taskID = uuid.NullUUID{UUID: t.ID, Valid: true}
		}
		if s.admit != nil {
			if err := s.admit.Admit(ctx, tx, a.TenantID, a.UserID); err != nil {
				return err
			}
		}
		model := func(m string) string {
			if m == "" {
				return conv.Model
			}
			return m
		}
		runID, msgID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
		pos, err := tx.Q.ConversationNextPositions(ctx, dbsqlc.ConversationNextPositionsParams{
			TenantID: a.TenantID, ID: conv.ID, N: 1, NewRun: true, ActiveRunID: uuid.NullUUID{UUID: runID, Valid: true},
		})
		if err != nil {
			return err
		}
		if _, err := tx.Q.TeamRunRowInsert(ctx, dbsqlc.TeamRunRowInsertParams{
			TenantID: a.TenantID, ID: runID, UserID: a.UserID, TaskID: taskID, ConversationID: uuid.NullUUID{UUID: conv.ID, Valid: true},
			ConversationSeq: pos.RunCount, TriggerMessageID: uuid.NullUUID{UUID: msgID, Valid: true},
		}); err != nil {
			return fmt.Errorf("insert team run: %w", err)
		}
		text := "Team goal: " + goal
		parts, err := json.Marshal([]llm.Block{{Type: llm.BlockText, Text: text}})
		if err != nil {
			return err
		}
		if _, err := tx.Q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
			TenantID: a.TenantID, ID: msgID, ConversationID: conv.ID, RunID: uuid.NullUUID{UUID: runID, Valid: true},
			RunSeq: pos.RunCount, Position: pos.MessageCount, Role: "USER", Content: text, Parts: parts, TokenEstimate: int32((len(text) + 3) / 4),
		}); err != nil {
			return fmt.Errorf("insert goal message: %w", err)
		}
		timeout := pick(in.TimeoutMinutes, def.TimeoutMinutes)
		tr, err := tx.Q.TeamRunInsert(ctx, dbsqlc.TeamRunInsertParams{
			TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: runID, UserID: a.UserID, ProjectID: conv.ProjectID, TaskID: taskID,
			Goal: goal, MaxIterations: int32(pick(in.MaxIterations, def.MaxIterations)), TimeoutSeconds: int32(timeout * 60),
			TokenBudget:    int64(pick(in.TokenBudget, def.TokenBudget)),
			ArchitectModel: model(in.Architect.Model), ArchitectMaxTurns: int32(pick(in.Architect.MaxTurns, def.ArchitectMaxTurns)),
			ExecutorModel: model(in.Executor.Model), ExecutorMaxTurns: int32(pick(in.Executor.MaxTurns, def.ExecutorMaxTurns)),
			ReviewerModel: model(in.Reviewer.Model), ReviewerMaxTurns: int32(pick(in.Reviewer.MaxTurns, def.ReviewerMaxTurns)),
			Deadline: time.Now().Add(s.minutes(timeout)).UTC(),
		})
		if err != nil {
			return fmt.Errorf("insert team: %w", err)
		}
		r, err := tx.Q.TeamRunStart(ctx, dbsqlc.TeamRunStartParams{TenantID: a.TenantID, ID: runID})
		if err != nil {
			return fmt.Errorf("start team run: %w", err)
		}
		if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), events.New{Type: EventRunStarted, Data: map[string]any{
			"teamRunId": tr.ID, "goal": truncate(goal, 2000), "maxIterations": tr.MaxIterations, "timeoutMinutes": timeout,
			"tokenBudget": tr.TokenBudget, "models": map[string]string{PhaseArchitect: tr.ArchitectModel, PhaseExecutor: tr.ExecutorModel, PhaseReviewer: tr.ReviewerModel},
		}}); err != nil {
			return err
		}
		if err := s.startPhase(ctx, tx, tr, r, PhaseArchitect, 1, 1, architectPrompt(tr)); err != nil {
			return err
		}
		out = Team{TeamRun: tr, Run: r}
		return nil
	})
	return out, err
}

// phaseConfig is a phase's model and turn limit in tr.
func phaseConfig(tr dbsqlc.TeamRun, phase string) (string, int32) {
	switch phase {
	case PhaseArchitect:
		return tr.ArchitectModel, tr.ArchitectMaxTurns
	case PhaseExecutor:
		return tr.ExecutorModel, tr.ExecutorMaxTurns
	}
	return tr.ReviewerModel, tr.ReviewerMaxTurns
}

// startPhase makes a phase of team tr (its TEAM run teamRun): a conversation with the phase's
// model and system prompt, the phase's run with prompt as its trigger message, the phase row,
// team.phase.started on the team run and task.queued on the phase run, and the phase run's job.
func (s *Service) startPhase(ctx context.Context, tx *db.Tx, tr dbsqlc.TeamRun, teamRun dbsqlc.Run, phase string, iteration, attempt int, prompt string) error {
	model, maxTurns := phaseConfig(tr, phase)
	set, err := settings.ForUserID(ctx, tx, tr.TenantID, tr.UserID)
	if err != nil {
		return err
	}
	own, err := s.runs.CreateOwn(ctx, tx, run.Own{
		TenantID: tr.TenantID, UserID: tr.UserID, ProjectID: tr.ProjectID, ConversationKind: "TASK",
		Title: fmt.Sprintf("Team %s, iteration %d", strings.ToLower(phase), iteration), Model: model, SystemPrompt: systemPrompt(phase),
		Kind: KindPhase, TaskID: tr.TaskID, MaxAttempts: int32(set.MaxRetries + 1), Prompt: prompt,
		Queued: map[string]any{"teamRunId": tr.ID, "phase": phase},
	})
	if err != nil {
		return err
	}
	r, runID := own.Run, own.Run.ID
	ph, err := tx.Q.TeamPhaseInsert(ctx, dbsqlc.TeamPhaseInsertParams{
		TenantID: tr.TenantID, ID: uuid.Must(uuid.NewV7()), TeamRunID: tr.ID, Phase: phase, Iteration: int32(iteration),
		Attempt: int32(attempt), Model: model, MaxTurns: maxTurns, RunID: runID,
	})
	if err != nil {
		return fmt.Errorf("insert phase: %w", err)
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(teamRun), events.New{Type: EventPhaseStarted, Phase: phase, Data: map[string]any{
		"phase": phase, "iteration": iteration, "attempt": attempt, "model": model, "maxTurns": maxTurns, "phaseId": ph.ID, "phaseRunId": runID,
	}}); err != nil {
		return err
	}
	if teamRun.PauseRequested {
		// The team run is paused: its next phase waits, parked, for resumeRun.
		return s.runs.Park(ctx, tx, r, "the team run is paused")
	}
	return s.runs.Enqueue(ctx, tx, r)
}

// Get returns one of the tenant's team runs (by its id or its TEAM run's id) with its run.
// VIEWER or higher; another tenant's is NOT_FOUND.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (Team, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return Team{}, err
	}
	var out Team
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		tr, err := tx.Q.TeamRunGet(ctx, dbsqlc.TeamRunGetParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			tr, err = tx.Q.TeamRunByRun(ctx, dbsqlc.TeamRunByRunParams{TenantID: a.TenantID, RunID: id})
		}
		if err != nil {
			return err
		}
		r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: a.TenantID, ID: tr.RunID})
		if err != nil {
			return err
		}
		out = Team{TeamRun: tr, Run: r}
		return nil
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("team run")
	}
	return out, err
}

// ByRuns returns the team runs of the tenant's TEAM runs among runIDs, by run id.
func (s *Service) ByRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]dbsqlc.TeamRun, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]dbsqlc.TeamRun{}
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.TeamRunsByRuns(ctx, dbsqlc.TeamRunsByRunsParams{TenantID: a.TenantID, RunIds: runIDs})
		for _, r := range rows {
			out[r.RunID] = r
		}
		return err
	})
	return out, err
}

// Phases returns a team run's phases in the order they started. VIEWER or higher.
func (s *Service) Phases(ctx context.Context, teamRunID uuid.UUID) ([]dbsqlc.TeamPhase, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.TeamPhase
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.TeamPhaseList(ctx, dbsqlc.TeamPhaseListParams{TenantID: a.TenantID, TeamRunID: teamRunID})
		return err
	})
	return out, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
