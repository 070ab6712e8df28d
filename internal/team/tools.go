package team

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/tool"
	"github.com/agentry/agentry/internal/workspace"
)

// SubmitReview is the name of the reviewer's verdict tool.
const SubmitReview = "submit_review"

// reviewSchema is submit_review's JSON schema: its arguments are validated against it (the tool
// registry's validator) before the verdict is stored; the problems go back to the model.
const reviewSchema = `{
  "type": "object",
  "properties": {
    "verdict": {"type": "string", "enum": ["APPROVE", "REQUEST_CHANGES", "BLOCK"]},
    "summary": {"type": "string", "minLength": 1, "maxLength": 10000},
    "issues": {
      "type": "array",
      "maxItems": 100,
      "items": {
        "type": "object",
        "properties": {
          "file": {"type": "string", "maxLength": 1000},
          "problem": {"type": "string", "minLength": 1, "maxLength": 5000},
          "suggestion": {"type": "string", "maxLength": 5000}
        },
        "required": ["problem"],
        "additionalProperties": false
      }
    }
  },
  "required": ["verdict", "summary", "issues"],
  "additionalProperties": false
}`

// submitReview stores the reviewer's verdict on its phase.
type submitReview struct{}

func (submitReview) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: SubmitReview, Description: "Give your verdict on the Executor's changes: APPROVE, REQUEST_CHANGES (with the issues to fix) or BLOCK (a person is needed). Call it once.", Parameters: json.RawMessage(reviewSchema)}
}
func (submitReview) Risk(json.RawMessage) int { return 0 }
func (submitReview) ReadOnly() bool           { return true }

func (submitReview) Run(ctx context.Context, env tool.Env, args json.RawMessage) (tool.Result, error) {
	var v Verdict
	if err := json.Unmarshal(args, &v); err != nil {
		return tool.Result{}, &tool.ArgumentError{Tool: SubmitReview, Problems: []string{err.Error()}}
	}
	if v.Issues == nil {
		v.Issues = []Issue{}
	}
	ph, err := env.Tx.Q.TeamPhaseByRunForUpdate(ctx, dbsqlc.TeamPhaseByRunForUpdateParams{TenantID: env.TenantID, RunID: env.RunID})
	if err != nil {
		return tool.Result{}, fmt.Errorf("load phase: %w", err)
	}
	if ph.Phase != PhaseReviewer {
		return tool.Result{}, fmt.Errorf("only the reviewer gives a verdict")
	}
	if VerdictOf(ph) != nil {
		return tool.Result{}, fmt.Errorf("the verdict was given already; end your review with a short reply")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return tool.Result{}, err
	}
	if _, err := env.Tx.Q.TeamPhaseSetVerdict(ctx, dbsqlc.TeamPhaseSetVerdictParams{TenantID: env.TenantID, ID: ph.ID, Verdict: raw}); err != nil {
		return tool.Result{}, fmt.Errorf("store verdict: %w", err)
	}
	return tool.Result{Output: "verdict recorded: " + v.Verdict + ". End your review now with one short sentence and no tool call."}, nil
}

// phaseTools are a phase's tools: the executor's (read-only ones only for the architect and
// the reviewer: any other call is a tool error and writes nothing) plus submit_review for the
// reviewer. Workspace changes are attributed to the team run (one snapshot, one journal).
type phaseTools struct {
	base     agent.Tools
	review   *tool.Registry // nil unless the phase is the reviewer
	readOnly bool
	phase    string
	team     events.Scope
}

func (p phaseTools) Specs() []llm.ToolSpec {
	var out []llm.ToolSpec
	if p.base != nil {
		for _, s := range p.base.Specs() {
			if _, ro := p.base.Info(s.Name); p.readOnly && !ro {
				continue
			}
			out = append(out, s)
		}
	}
	if p.review != nil {
		specs, _ := p.review.Specs(SubmitReview)
		out = append(out, specs...)
	}
	return out
}

func (p phaseTools) Info(name string) (bool, bool) {
	if p.review != nil && name == SubmitReview {
		return true, true
	}
	if p.base == nil {
		return false, false
	}
	known, ro := p.base.Info(name)
	if known && p.readOnly {
		// Refused by Run without a person's say: nothing to approve.
		return true, true
	}
	return known, ro
}

func (p phaseTools) Risk(name string, args json.RawMessage) int {
	if p.review != nil && name == SubmitReview {
		return 0
	}
	if p.base == nil {
		return 100
	}
	if known, ro := p.base.Info(name); known && p.readOnly && !ro {
		return 0
	}
	return p.base.Risk(name, args)
}

func (p phaseTools) Run(ctx context.Context, tx *db.Tx, c agent.ToolCall) (string, error) {
	if p.review != nil && c.Name == SubmitReview {
		res, err := p.review.Run(ctx, tool.Env{Tx: tx, TenantID: c.TenantID, ProjectID: c.ProjectID, UserID: c.UserID, RunID: c.RunID}, c.Name, c.Args)
		return res.Output, err
	}
	if p.base == nil {
		return "", fmt.Errorf("unknown tool %q", c.Name)
	}
	if known, ro := p.base.Info(c.Name); known && p.readOnly && !ro {
		return "", fmt.Errorf("the %s has read-only tools: %s changes the workspace and was not run; nothing was written", phaseName(p.phase), c.Name)
	}
	return p.base.Run(workspace.AttributeTo(ctx, p.team), tx, c)
}

func phaseName(phase string) string {
	switch phase {
	case PhaseArchitect:
		return "architect"
	case PhaseExecutor:
		return "executor"
	}
	return "reviewer"
}

// Hooks are what a team phase adds to the executor (agent.KindHooks and agent.ToolScope): the
// phase's turn limit, the team's remaining wall-clock time as the duration limit, and the
// phase's tools.
type Hooks struct {
	review *tool.Registry
	now    func() time.Time
}

var (
	_ agent.KindHooks = (*Hooks)(nil)
	_ agent.ToolScope = (*Hooks)(nil)
)

// NewHooks returns the executor hooks of TEAM_PHASE runs.
func NewHooks() *Hooks {
	reg := tool.NewEmptyRegistry()
	if err := reg.Register(submitReview{}); err != nil {
		panic(err) // a constant schema: cannot fail
	}
	return &Hooks{review: reg, now: time.Now}
}

// Limits bounds a phase run: its phase's turns, and the time the team has left.
func (h *Hooks) Limits(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (agent.Limits, error) {
	ph, tr, err := phaseOf(ctx, tx, r)
	if err != nil {
		return agent.Limits{}, err
	}
	start := h.now()
	if r.StartedAt != nil {
		start = *r.StartedAt
	}
	left := tr.Deadline.Sub(start)
	if left <= 0 {
		left = time.Nanosecond // the terminator ends it at once (max_duration)
	}
	return agent.Limits{MaxTurns: int(ph.MaxTurns), MaxDuration: left}, nil
}

// Started does nothing: a phase's start was recorded when it was made.
func (h *Hooks) Started(context.Context, *db.Tx, dbsqlc.Run) error { return nil }

// Tools scopes base to the phase.
func (h *Hooks) Tools(ctx context.Context, tx *db.Tx, r dbsqlc.Run, base agent.Tools) (agent.Tools, error) {
	ph, tr, err := phaseOf(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	teamRun, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: r.TenantID, ID: tr.RunID})
	if err != nil {
		return nil, err
	}
	pt := phaseTools{base: base, readOnly: ph.Phase != PhaseExecutor, phase: ph.Phase, team: run.ScopeOf(teamRun)}
	if ph.Phase == PhaseReviewer {
		pt.review = h.review
	}
	return pt, nil
}

func phaseOf(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (dbsqlc.TeamPhase, dbsqlc.TeamRun, error) {
	ph, err := tx.Q.TeamPhaseByRun(ctx, dbsqlc.TeamPhaseByRunParams{TenantID: r.TenantID, RunID: r.ID})
	if err != nil {
		return ph, dbsqlc.TeamRun{}, fmt.Errorf("load phase of run %s: %w", r.ID, err)
	}
	tr, err := tx.Q.TeamRunGet(ctx, dbsqlc.TeamRunGetParams{TenantID: r.TenantID, ID: ph.TeamRunID})
	if err != nil {
		return ph, tr, fmt.Errorf("load team of run %s: %w", r.ID, err)
	}
	return ph, tr, nil
}
