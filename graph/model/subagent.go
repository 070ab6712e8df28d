package model

import (
	"time"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Subagent is a sub-agent row.
type Subagent struct{ Row dbsqlc.Subagent }

func (s *Subagent) ID() string                  { return EncodeID("Subagent", s.Row.ID) }
func (*Subagent) IsNode()                       {}
func (s *Subagent) GetID() string               { return s.ID() }
func (s *Subagent) Role() SubagentRole          { return SubagentRole(s.Row.Role) }
func (s *Subagent) Goal() string                { return s.Row.Goal }
func (s *Subagent) Status() SubagentStatus      { return SubagentStatus(s.Row.Status) }
func (s *Subagent) Priority() int               { return int(s.Row.Priority) }
func (s *Subagent) Depth() int                  { return int(s.Row.Depth) }
func (s *Subagent) MaxTurns() int               { return int(s.Row.MaxTurns) }
func (s *Subagent) MaxTokens() int              { return int(s.Row.MaxTokens) }
func (s *Subagent) TimeoutMinutes() int         { return int(s.Row.TimeoutMinutes) }
func (s *Subagent) Tools() []string             { return s.Row.Tools }
func (s *Subagent) Result() *string             { return s.Row.Result }
func (s *Subagent) Error() *string              { return s.Row.Error }
func (s *Subagent) FailureClass() *FailureClass { return (*FailureClass)(s.Row.FailureClass) }
func (s *Subagent) CreatedAt() time.Time        { return s.Row.CreatedAt }
func (s *Subagent) StartedAt() *time.Time       { return s.Row.StartedAt }
func (s *Subagent) FinishedAt() *time.Time      { return s.Row.FinishedAt }

// Plan is a plan's row.
type Plan struct{ Row dbsqlc.Plan }

func (p *Plan) Name() string             { return p.Row.Name }
func (p *Plan) SubagentsRunningMax() int { return int(p.Row.SubagentsRunningMax) }
func (p *Plan) SpendRate() int           { return int(p.Row.SpendRate) }
func (p *Plan) SpendBurst() int          { return int(p.Row.SpendBurst) }
func (p *Plan) UpdatedAt() time.Time     { return p.Row.UpdatedAt }
