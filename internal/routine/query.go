package routine

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Metrics are a routine run's tokens and step executions, per step and in all (RoutineMetrics).
type Metrics struct {
	InputTokens  int64
	OutputTokens int64
	Executions   int64
	Steps        []StepMetrics
}

// StepMetrics are one step's tokens and executions.
type StepMetrics struct {
	StepKey      string
	InputTokens  int64
	OutputTokens int64
	Executions   int64
}

func metricsOf(results []dbsqlc.RoutineStepResult) Metrics {
	var m Metrics
	idx := map[string]int{}
	for _, r := range results {
		i, ok := idx[r.StepKey]
		if !ok {
			i = len(m.Steps)
			idx[r.StepKey] = i
			m.Steps = append(m.Steps, StepMetrics{StepKey: r.StepKey})
		}
		m.Steps[i].InputTokens += r.InputTokens
		m.Steps[i].OutputTokens += r.OutputTokens
		m.Steps[i].Executions++
		m.InputTokens += r.InputTokens
		m.OutputTokens += r.OutputTokens
		m.Executions++
	}
	return m
}

// RunInfo is a routine run as routineRun shows it.
type RunInfo struct {
	Run dbsqlc.Run
	// RoutineID is the routine the run worked (uuid.Nil once the routine was deleted).
	RoutineID uuid.UUID
	Context   json.RawMessage
	Results   []dbsqlc.RoutineStepResult
	Metrics   Metrics
	// CurrentStep is the step the run is at (nil before it starts).
	CurrentStep *string
	// Roles maps role ids to the roles the run started with (name, colour).
	Roles map[string]RoleRef
}

// RoleRef names a role and its colour as a run knows it.
type RoleRef struct{ Name, Color string }

// RunInfo returns a routine run's context, step results and metrics; a run that is not a
// routine run, or another tenant's, is NOT_FOUND. VIEWER or higher.
func (s *Service) RunInfo(ctx context.Context, runID uuid.UUID) (RunInfo, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return RunInfo{}, err
	}
	var out RunInfo
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		st, err := s.loadState(ctx, tx, a.TenantID, runID, false)
		if err != nil {
			return err
		}
		out.Run, out.RoutineID, out.Context, out.CurrentStep = st.run, st.row.RoutineID.UUID, st.row.Context, st.row.CurrentStep
		out.Roles = map[string]RoleRef{}
		for id, r := range st.def.Roles {
			out.Roles[id] = RoleRef{Name: r.Name, Color: r.Color}
		}
		out.Results, err = tx.Q.RoutineStepResultList(ctx, dbsqlc.RoutineStepResultListParams{TenantID: a.TenantID, RunID: runID})
		out.Metrics = metricsOf(out.Results)
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("routine run")
	}
	return out, err
}

// Runs returns a routine's runs, newest first (at most limit). VIEWER or higher.
func (s *Service) Runs(ctx context.Context, routineID uuid.UUID, limit int) ([]dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RoutineRunList(ctx, dbsqlc.RoutineRunListParams{TenantID: a.TenantID, RoutineID: uuid.NullUUID{UUID: routineID, Valid: true}, Lim: int32(limit)})
		return err
	})
	return out, err
}
