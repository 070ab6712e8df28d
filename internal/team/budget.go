package team

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/usage"
)

// Budgets is the executor's budget path with the team's token budget in front of it: before a
// phase run's model call its worst case (usage.WorstCase) is reserved on the team run with one
// conditional UPDATE (used + reserved never exceeds the team's budget), then on the user's and
// tenant's budgets (inner); the call's actual tokens are settled on both in the transaction
// that stores the reply. A phase holds at most one reservation (its calls are sequential); a
// newer attempt's reservation replaces an older one, and the phase's end releases what is left.
type Budgets struct {
	runs  *run.Service
	inner agent.Budgets
}

// NewBudgets wraps inner (nil: only the team budget).
func NewBudgets(runs *run.Service, inner agent.Budgets) *Budgets {
	return &Budgets{runs: runs, inner: inner}
}

var _ agent.Budgets = (*Budgets)(nil)

// Reserve holds the call's worst case on the team budget (phase runs), then on the others. A
// team budget without room is BUDGET_EXCEEDED: the phase run ends budget_exceeded and the team
// fails with reason budget.
func (b *Budgets) Reserve(ctx context.Context, l run.Lease, callIndex int, m llm.Model, req llm.Request) (bool, error) {
	held := false
	if l.Run.Kind == KindPhase {
		n, _ := usage.WorstCase(m, req)
		var short *dbsqlc.TeamRun
		err := b.runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
			ph, err := tx.Q.TeamPhaseByRunForUpdate(ctx, dbsqlc.TeamPhaseByRunForUpdateParams{TenantID: l.Run.TenantID, RunID: l.Run.ID})
			if err != nil {
				return fmt.Errorf("load phase: %w", err)
			}
			_, err = tx.Q.TeamBudgetReserve(ctx, dbsqlc.TeamBudgetReserveParams{TenantID: ph.TenantID, ID: ph.TeamRunID, Old: ph.ReservedTokens, N: n})
			if db.IsNoRows(err) {
				// No room: give back what the phase held, and refuse.
				tr, err := tx.Q.TeamBudgetSettle(ctx, dbsqlc.TeamBudgetSettleParams{TenantID: ph.TenantID, ID: ph.TeamRunID, Old: ph.ReservedTokens, Used: 0})
				if err != nil {
					return err
				}
				short = &tr
				return tx.Q.TeamPhaseSetReserved(ctx, dbsqlc.TeamPhaseSetReservedParams{TenantID: ph.TenantID, ID: ph.ID, ReservedTokens: 0})
			}
			if err != nil {
				return fmt.Errorf("reserve team budget: %w", err)
			}
			return tx.Q.TeamPhaseSetReserved(ctx, dbsqlc.TeamPhaseSetReservedParams{TenantID: ph.TenantID, ID: ph.ID, ReservedTokens: n})
		})
		if err != nil {
			return false, err
		}
		if short != nil {
			return false, apperr.New(apperr.BudgetExceeded, "the team's token budget is used up (%d of %d tokens spent; the next call may need %d)", short.TokensUsed, short.TokenBudget, n)
		}
		held = true
	}
	if b.inner == nil {
		return held, nil
	}
	innerHeld, err := b.inner.Reserve(ctx, l, callIndex, m, req)
	if err != nil && held {
		_ = b.releaseTeam(context.WithoutCancel(ctx), l)
	}
	return held || innerHeld, err
}

// ReserveTx is the other budgets' reservation ahead, in the transaction that acquires a run
// (a chat turn's first call). A phase run reserves nothing ahead (the executor does not ask it
// to: phases have hooks); should it be asked, nothing is held and Reserve decides when the call
// is made.
func (b *Budgets) ReserveTx(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, m llm.Model, req llm.Request) (bool, error) {
	if l.Run.Kind == KindPhase || b.inner == nil {
		return false, nil
	}
	return b.inner.ReserveTx(ctx, tx, l, callIndex, m, req)
}

// Settle counts the call's tokens on the team budget and settles the other budgets (last: see
// agent.Budgets).
func (b *Budgets) Settle(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, u llm.Usage, costMicros int64) error {
	if l.Run.Kind == KindPhase {
		if err := settleTeam(ctx, tx, l.Run, u.InputTokens+u.OutputTokens); err != nil {
			return err
		}
	}
	if b.inner == nil {
		return nil
	}
	return b.inner.Settle(ctx, tx, l, callIndex, u, costMicros)
}

// Release gives back what the call held.
func (b *Budgets) Release(ctx context.Context, l run.Lease, callIndex int) error {
	var err error
	if l.Run.Kind == KindPhase {
		err = b.releaseTeam(ctx, l)
	}
	if b.inner != nil {
		if ierr := b.inner.Release(ctx, l, callIndex); ierr != nil && err == nil {
			err = ierr
		}
	}
	return err
}

func (b *Budgets) releaseTeam(ctx context.Context, l run.Lease) error {
	return b.runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
		return settleTeam(ctx, tx, l.Run, 0)
	})
}

// settleTeam gives back what phase run r holds of its team's budget and counts used tokens.
func settleTeam(ctx context.Context, tx *db.Tx, r dbsqlc.Run, used int64) error {
	ph, err := tx.Q.TeamPhaseByRunForUpdate(ctx, dbsqlc.TeamPhaseByRunForUpdateParams{TenantID: r.TenantID, RunID: r.ID})
	if err != nil {
		return fmt.Errorf("load phase: %w", err)
	}
	if ph.ReservedTokens == 0 && used == 0 {
		return nil
	}
	if _, err := tx.Q.TeamBudgetSettle(ctx, dbsqlc.TeamBudgetSettleParams{TenantID: ph.TenantID, ID: ph.TeamRunID, Old: ph.ReservedTokens, Used: used}); err != nil {
		return fmt.Errorf("settle team budget: %w", err)
	}
	return tx.Q.TeamPhaseSetReserved(ctx, dbsqlc.TeamPhaseSetReservedParams{TenantID: ph.TenantID, ID: ph.ID, ReservedTokens: 0})
}
