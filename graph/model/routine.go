package model

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// RoutineRole is a role row (a routine step's worker).
type RoutineRole struct{ Row dbsqlc.Role }

func (r *RoutineRole) ID() string               { return EncodeID("RoutineRole", r.Row.ID) }
func (*RoutineRole) IsNode()                    {}
func (r *RoutineRole) GetID() string            { return r.ID() }
func (r *RoutineRole) Name() string             { return r.Row.Name }
func (r *RoutineRole) Color() string            { return r.Row.Color }
func (r *RoutineRole) SystemPrompt() string     { return r.Row.SystemPrompt }
func (r *RoutineRole) DeveloperPrompt() *string { return r.Row.DeveloperPrompt }
func (r *RoutineRole) Model() *string           { return r.Row.Model }
func (r *RoutineRole) Templates() JSON          { return JSON(r.Row.Templates) }
func (r *RoutineRole) Tools() []string          { return r.Row.Tools }

// Routine is a routine row; its steps and edges are resolved from it.
type Routine struct{ Row dbsqlc.Routine }

func (r *Routine) ID() string              { return EncodeID("Routine", r.Row.ID) }
func (*Routine) IsNode()                   {}
func (r *Routine) GetID() string           { return r.ID() }
func (r *Routine) Name() string            { return r.Row.Name }
func (r *Routine) Description() *string    { return r.Row.Description }
func (r *Routine) Trigger() RoutineTrigger { return RoutineTrigger(r.Row.Trigger) }
func (r *Routine) Cron() *string           { return r.Row.Cron }
func (r *Routine) Timezone() *string       { return r.Row.Timezone }
func (r *Routine) Active() bool            { return r.Row.Active }
func (r *Routine) MaxRetries() int         { return int(r.Row.MaxRetries) }
func (r *Routine) ProjectID() string       { return EncodeID("Project", r.Row.ProjectID) }
func (r *Routine) NextFireAt() *time.Time  { return r.Row.NextFireAt }

// RoutineStep is one step of a routine.
type RoutineStep struct {
	ID     string
	Key    string
	Name   string
	Type   StepType
	Role   *RoutineRole
	Phase  *RoutinePhase
	Config JSON
	Entry  bool
}

// RoutineEdge joins two steps by key.
type RoutineEdge struct {
	From      string
	To        string
	Condition EdgeCondition
}

// StepResult is one step execution's result.
type StepResult struct {
	StepKey        string
	StepName       string
	StepType       StepType
	Role           *RoutineRole
	RoleColor      *string
	Passed         bool
	Output         *string
	Data           JSON
	InputTokens    int64
	OutputTokens   int64
	ExecutionCount int
	DurationMs     int
	CreatedAt      time.Time
}

// RoutineRun is a run of kind ROUTINE with its context and results.
type RoutineRun struct {
	Run         *Run
	RoutineID   uuid.UUID
	Context     JSON
	CurrentStep *string
	StepResults []*StepResult
	Metrics     *RoutineMetrics
}

// RawJSON wraps bytes as JSON (nil for none).
func RawJSON(b []byte) JSON {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return JSON(json.RawMessage(b))
}
