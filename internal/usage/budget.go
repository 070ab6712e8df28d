package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Budget is a spending limit with the counters of its current window.
type Budget struct {
	ID       uuid.UUID
	TenantID uuid.UUID
	Scope    string    // ScopeTenant or ScopeUser
	UserID   uuid.UUID // the user of a USER budget; uuid.Nil for TENANT
	Period   string    // PeriodDay or PeriodMonth (UTC)
	// TokenLimit (input + output tokens) and CostLimitMicros; nil is no limit on that measure.
	TokenLimit      *int64
	CostLimitMicros *int64
	// PeriodStart is the start of the current window; the counters below are the window's.
	PeriodStart    time.Time
	SpentTokens    int64
	SpentMicros    int64
	ReservedTokens int64
	ReservedMicros int64
}

// SetBudget is the input of Service.SetBudget. UserID is required for ScopeUser and must be
// uuid.Nil for ScopeTenant.
type SetBudget struct {
	Scope           string
	UserID          uuid.UUID
	Period          string
	TokenLimit      *int64
	CostLimitMicros *int64
}

// SetBudget makes or replaces the one budget of (scope, user, period) (ADMIN or higher). A new
// budget's window starts with the usage the window already holds; a replaced one keeps its
// counters.
func (s *Service) SetBudget(ctx context.Context, in SetBudget) (Budget, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return Budget{}, err
	}
	switch in.Scope {
	case ScopeTenant:
		if in.UserID != uuid.Nil {
			return Budget{}, apperr.Invalid("userId", "must be omitted for a TENANT budget")
		}
	case ScopeUser:
		if in.UserID == uuid.Nil {
			return Budget{}, apperr.Invalid("userId", "is required for a USER budget")
		}
	default:
		return Budget{}, apperr.Invalid("scope", "must be TENANT or USER")
	}
	if in.Period != PeriodDay && in.Period != PeriodMonth {
		return Budget{}, apperr.Invalid("period", "must be DAY or MONTH")
	}
	if in.TokenLimit != nil && *in.TokenLimit < 0 {
		return Budget{}, apperr.Invalid("tokenLimit", "must not be negative")
	}
	if in.CostLimitMicros != nil && *in.CostLimitMicros < 0 {
		return Budget{}, apperr.Invalid("costLimitMicros", "must not be negative")
	}
	var out Budget
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		user := uuid.NullUUID{}
		if in.Scope == ScopeUser {
			if _, err := tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: a.TenantID, UserID: in.UserID}); db.IsNoRows(err) {
				return apperr.NotFoundf("user")
			} else if err != nil {
				return err
			}
			user = uuid.NullUUID{UUID: in.UserID, Valid: true}
		}
		id, err := tx.Q.BudgetUpsert(ctx, dbsqlc.BudgetUpsertParams{
			TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), Scope: in.Scope, UserID: user, Period: in.Period,
			TokenLimit: in.TokenLimit, CostLimitMicros: in.CostLimitMicros,
		})
		if err != nil {
			return fmt.Errorf("set budget: %w", err)
		}
		if err := tx.Q.BudgetStripesSet(ctx, dbsqlc.BudgetStripesSetParams{TenantID: a.TenantID, ID: id}); err != nil {
			return fmt.Errorf("set budget: deal out its limits: %w", err)
		}
		row, err := tx.Q.BudgetGet(ctx, dbsqlc.BudgetGetParams{TenantID: a.TenantID, ID: id})
		out = budgetOf(row)
		return err
	})
	if err == nil {
		s.setPresence(a.TenantID, true)
	}
	return out, err
}

// Budgets lists the budgets that apply to the caller: every budget of the tenant for ADMIN and
// above, the tenant-wide ones and the caller's own otherwise.
func (s *Service) Budgets(ctx context.Context) ([]Budget, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	user := uuid.NullUUID{}
	if !a.Role.AtLeast(auth.RoleAdmin) {
		user = uuid.NullUUID{UUID: a.UserID, Valid: true}
	}
	var rows []dbsqlc.BudgetListRow
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err = tx.Q.BudgetList(ctx, dbsqlc.BudgetListParams{TenantID: a.TenantID, UserID: user})
		return err
	})
	out := make([]Budget, len(rows))
	for i, r := range rows {
		out[i] = budgetOf(dbsqlc.BudgetGetRow(r))
	}
	return out, err
}

// Budget returns one budget the caller may read (see Budgets); any other is NOT_FOUND.
func (s *Service) Budget(ctx context.Context, id uuid.UUID) (Budget, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return Budget{}, err
	}
	var row dbsqlc.BudgetGetRow
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		row, err = tx.Q.BudgetGet(ctx, dbsqlc.BudgetGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return Budget{}, apperr.NotFoundf("budget")
	}
	if err != nil {
		return Budget{}, err
	}
	b := budgetOf(row)
	if !a.Role.AtLeast(auth.RoleAdmin) && b.Scope == ScopeUser && b.UserID != a.UserID {
		return Budget{}, apperr.NotFoundf("budget")
	}
	return b, nil
}

// DeleteBudget removes a budget (ADMIN or higher). Reservations held on it lapse with it.
func (s *Service) DeleteBudget(ctx context.Context, id uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		n, err := tx.Q.BudgetDelete(ctx, dbsqlc.BudgetDeleteParams{TenantID: a.TenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.NotFoundf("budget")
		}
		return nil
	})
}

// Admit refuses a new run (BUDGET_EXCEEDED) while a budget applying to the user has nothing
// left (spent + reserved >= limit). It runs inside the caller's transaction (runTask, spawns,
// team runs); a budget with room left admits the run, whose calls then reserve as they go.
func (s *Service) Admit(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) error {
	var b pgx.Batch
	admitted := s.QueueAdmit(&b, tenantID, userID)
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("check budgets: %w", err)
	}
	return admitted()
}

// QueueAdmit is Admit with its read queued in b (sendMessage sends it with its other reads):
// the function it returns is the verdict once b's results are read.
func (s *Service) QueueAdmit(b *pgx.Batch, tenantID, userID uuid.UUID) func() error {
	var rows []dbsqlc.BudgetExhaustedRow
	dbsqlc.QueueMany(b, func(q *dbsqlc.Queries) ([]dbsqlc.BudgetExhaustedRow, error) {
		return q.BudgetExhausted(context.Background(), dbsqlc.BudgetExhaustedParams{TenantID: tenantID, UserID: userID})
	}, &rows)
	return func() error {
		if len(rows) == 0 {
			return nil
		}
		b := rows[0]
		s.metrics.BudgetRefused("admission", b.Scope)
		return exceeded(b.Scope, b.Period)
	}
}

// exceeded is the BUDGET_EXCEEDED error naming a budget by its scope and period.
func exceeded(scope, period string) *apperr.Error {
	what := "tenant's"
	if scope == ScopeUser {
		what = "user's"
	}
	return apperr.New(apperr.BudgetExceeded, "the %s %s budget is used up", what, map[string]string{PeriodDay: "daily", PeriodMonth: "monthly"}[period]).
		With("scope", scope).With("period", period)
}

func budgetOf(r dbsqlc.BudgetGetRow) Budget {
	return Budget{
		ID: r.ID, TenantID: r.TenantID, Scope: r.Scope, UserID: r.UserID.UUID, Period: r.Period,
		TokenLimit: r.TokenLimit, CostLimitMicros: r.CostLimitMicros, PeriodStart: r.PeriodStart.UTC(),
		SpentTokens: r.SpentTokens, SpentMicros: r.SpentMicros, ReservedTokens: r.ReservedTokens, ReservedMicros: r.ReservedMicros,
	}
}
