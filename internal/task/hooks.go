package task

import (
	"context"
	"fmt"
	"time"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
)

// Base limits of a task run, before the complexity factor.
const (
	MaxTurns     = 100
	MaxDuration  = 30 * time.Minute
	ConfirmAfter = 20
)

// Factor is how much a complexity scales the turn and duration limits of a task run (an unknown
// complexity counts as STANDARD).
func Factor(complexity string) float64 {
	switch complexity {
	case ComplexitySimple:
		return 0.5
	case ComplexityComplex:
		return 2
	}
	return 1
}

// LimitsFor returns the limits of a run on a task of the given complexity: see the table in the
// package comment.
func LimitsFor(complexity string) agent.Limits {
	f := Factor(complexity)
	return agent.Limits{
		MaxTurns:     int(float64(MaxTurns) * f),
		MaxDuration:  time.Duration(float64(MaxDuration) * f),
		ConfirmAfter: ConfirmAfter,
	}
}

// Hooks is what task runs add to the executor (agent.KindHooks) and to the end of a run
// (Finished, a run.FinishHook). The zero value is ready to use.
type Hooks struct{}

var (
	_ agent.KindHooks = Hooks{}
	_ run.FinishHook  = Hooks{}.Finished
)

// Limits returns the limits of r from its task's complexity (STANDARD for a run without a task).
func (Hooks) Limits(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (agent.Limits, error) {
	if !r.TaskID.Valid {
		return LimitsFor(ComplexityStandard), nil
	}
	t, err := tx.Q.TaskGet(ctx, dbsqlc.TaskGetParams{TenantID: r.TenantID, ID: r.TaskID.UUID})
	if err != nil {
		return agent.Limits{}, fmt.Errorf("load task of run %s: %w", r.ID, err)
	}
	return LimitsFor(t.Complexity), nil
}

// Started moves r's task to IN_PROGRESS when a worker starts (or resumes) the run, unless the
// task is DONE.
func (Hooks) Started(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	if !r.TaskID.Valid {
		return nil
	}
	t, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: r.TenantID, ID: r.TaskID.UUID})
	if err != nil {
		return fmt.Errorf("load task of run %s: %w", r.ID, err)
	}
	if t.Status == StatusInProgress || t.Status == StatusDone {
		return nil
	}
	return setStatus(ctx, tx, t, StatusInProgress)
}

// Finished moves the task of a run that ended: DONE when the run COMPLETED because the model
// stopped on its own (terminationReason "completed"); otherwise (failed, cancelled, timed out,
// or completed by a limit or a stop) back to READY, when the task is still IN_PROGRESS. It runs
// in the transaction that ends the run.
func (Hooks) Finished(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
	if !fin.TaskID.Valid {
		return nil
	}
	t, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: fin.TenantID, ID: fin.TaskID.UUID})
	if err != nil {
		return fmt.Errorf("load task of run %s: %w", fin.ID, err)
	}
	if fin.Status == run.StatusCompleted && fin.TerminationReason != nil && *fin.TerminationReason == agent.ReasonCompleted {
		if t.Status == StatusDone {
			return nil
		}
		return setStatus(ctx, tx, t, StatusDone)
	}
	if t.Status != StatusInProgress {
		return nil // not started yet (still READY), or the user set the status during the run
	}
	return setStatus(ctx, tx, t, StatusReady)
}

func setStatus(ctx context.Context, tx *db.Tx, t dbsqlc.Task, status Status) error {
	if _, err := tx.Q.TaskSetStatus(ctx, dbsqlc.TaskSetStatusParams{TenantID: t.TenantID, ID: t.ID, Status: status}); err != nil {
		return fmt.Errorf("set status of task %s: %w", t.ID, err)
	}
	return nil
}
