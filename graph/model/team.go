package model

import (
	"time"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// TeamRun is a team run (internal/team).
type TeamRun struct{ Row dbsqlc.TeamRun }

func (t *TeamRun) ID() string          { return EncodeID("TeamRun", t.Row.ID) }
func (t *TeamRun) Goal() string        { return t.Row.Goal }
func (t *TeamRun) Plan() *string       { return t.Row.Plan }
func (t *TeamRun) MaxIterations() int  { return int(t.Row.MaxIterations) }
func (t *TeamRun) TimeoutMinutes() int { return int(t.Row.TimeoutSeconds / 60) }
func (t *TeamRun) TokenBudget() int64  { return t.Row.TokenBudget }
func (t *TeamRun) TokensUsed() int64   { return t.Row.TokensUsed }
func (t *TeamRun) Deadline() time.Time { return t.Row.Deadline }

// TeamPhaseRun is one phase of a team run.
type TeamPhaseRun struct {
	Row     dbsqlc.TeamPhase
	Verdict *TeamReview
}

func (p *TeamPhaseRun) Phase() TeamPhase           { return TeamPhase(p.Row.Phase) }
func (p *TeamPhaseRun) Iteration() int             { return int(p.Row.Iteration) }
func (p *TeamPhaseRun) Attempt() int               { return int(p.Row.Attempt) }
func (p *TeamPhaseRun) Model() string              { return p.Row.Model }
func (p *TeamPhaseRun) MaxTurns() int              { return int(p.Row.MaxTurns) }
func (p *TeamPhaseRun) Status() RunStatus          { return RunStatus(p.Row.Status) }
func (p *TeamPhaseRun) Turns() int                 { return int(p.Row.Turns) }
func (p *TeamPhaseRun) Tokens() int64              { return p.Row.InputTokens + p.Row.OutputTokens }
func (p *TeamPhaseRun) InputTokens() int64         { return p.Row.InputTokens }
func (p *TeamPhaseRun) OutputTokens() int64        { return p.Row.OutputTokens }
func (p *TeamPhaseRun) Output() *string            { return p.Row.Output }
func (p *TeamPhaseRun) TerminationReason() *string { return p.Row.TerminationReason }
func (p *TeamPhaseRun) StartedAt() time.Time       { return p.Row.StartedAt }
func (p *TeamPhaseRun) FinishedAt() *time.Time     { return p.Row.FinishedAt }
