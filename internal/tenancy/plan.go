package tenancy

import (
	"context"
	"fmt"
	"regexp"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// DefaultPlan is the plan a new tenant is on (tenants.plan's default); its sub-agent limit is 8
// until a platform admin changes it.
const DefaultPlan = "free"

// Bounds of a plan's sub-agent limit and of its spend rate and burst (the table's CHECK
// constraints match).
const (
	MinSubagentsRunning = 1
	MaxSubagentsRunning = 10_000
	MinSpend            = 1
	MaxSpend            = 100_000
)

// PlanLimits are the limits setPlan sets. A nil spend limit keeps the plan's; a new plan gets
// the plans table's column defaults.
type PlanLimits struct {
	SubagentsRunningMax int
	// SpendRate and SpendBurst limit the spending mutations of one tenant on the plan, per
	// second and at once.
	SpendRate, SpendBurst *int
}

var planNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)

// platformAdmin returns the caller when they are a platform admin (FORBIDDEN otherwise).
func platformAdmin(ctx context.Context) (auth.Actor, error) {
	a, ok := auth.ActorFrom(ctx)
	if !ok {
		return a, apperr.New(apperr.Unauthenticated, "authentication required")
	}
	if !a.PlatformAdmin {
		return a, apperr.New(apperr.Forbidden, "platform admins only")
	}
	return a, nil
}

// Plans returns every plan, by name (platform admins only).
func (s *Service) Plans(ctx context.Context) ([]dbsqlc.Plan, error) {
	if _, err := platformAdmin(ctx); err != nil {
		return nil, err
	}
	var out []dbsqlc.Plan
	err := s.db.InSystemTx(ctx, "plans: platform-wide limits", func(ctx context.Context, tx *db.Tx) error {
		var err error
		out, err = tx.Q.PlanList(ctx)
		return err
	})
	return out, err
}

// SetPlan creates plan name or changes its limits: running sub-agents and spending per tenant
// (platform admins only). A bad name or a limit out of range is BAD_USER_INPUT.
func (s *Service) SetPlan(ctx context.Context, name string, in PlanLimits) (dbsqlc.Plan, error) {
	subagentsRunningMax := in.SubagentsRunningMax
	if _, err := platformAdmin(ctx); err != nil {
		return dbsqlc.Plan{}, err
	}
	if !planNameRE.MatchString(name) {
		return dbsqlc.Plan{}, apperr.Invalid("name", "must be 1 to 40 lower case letters, digits, - or _, starting with a letter")
	}
	if subagentsRunningMax < MinSubagentsRunning || subagentsRunningMax > MaxSubagentsRunning {
		return dbsqlc.Plan{}, apperr.Invalid("subagentsRunningMax", "must be between %d and %d (got %d)", MinSubagentsRunning, MaxSubagentsRunning, subagentsRunningMax).
			With("min", MinSubagentsRunning).With("max", MaxSubagentsRunning)
	}
	spend := dbsqlc.PlanSetSpendParams{Name: name}
	for _, f := range []struct {
		field string
		in    *int
		out   **int32
	}{{"spendRate", in.SpendRate, &spend.SpendRate}, {"spendBurst", in.SpendBurst, &spend.SpendBurst}} {
		if f.in == nil {
			continue
		}
		if *f.in < MinSpend || *f.in > MaxSpend {
			return dbsqlc.Plan{}, apperr.Invalid(f.field, "must be between %d and %d (got %d)", MinSpend, MaxSpend, *f.in).
				With("min", MinSpend).With("max", MaxSpend)
		}
		v := int32(*f.in)
		*f.out = &v
	}
	var out dbsqlc.Plan
	err := s.db.InSystemTx(ctx, "plans: a platform admin sets a plan's limits", func(ctx context.Context, tx *db.Tx) error {
		var err error
		out, err = tx.Q.PlanUpsert(ctx, dbsqlc.PlanUpsertParams{Name: name, SubagentsRunningMax: int32(subagentsRunningMax)})
		if err != nil {
			return fmt.Errorf("save plan %s: %w", name, err)
		}
		if spend.SpendRate != nil || spend.SpendBurst != nil {
			if out, err = tx.Q.PlanSetSpend(ctx, spend); err != nil {
				return fmt.Errorf("set plan %s's spend limits: %w", name, err)
			}
		}
		s.planChanged(tx)
		return nil
	})
	return out, err
}

// SetTenantPlan puts tenant tenantID on plan (platform admins only): an unknown plan is
// BAD_USER_INPUT, an unknown tenant NOT_FOUND.
func (s *Service) SetTenantPlan(ctx context.Context, tenantID uuid.UUID, plan string) (dbsqlc.Tenant, error) {
	if _, err := platformAdmin(ctx); err != nil {
		return dbsqlc.Tenant{}, err
	}
	var out dbsqlc.Tenant
	err := s.db.InSystemTx(ctx, "plans: a platform admin puts a tenant on a plan", func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.PlanGet(ctx, plan); db.IsNoRows(err) {
			return apperr.Invalid("plan", "%q is not a plan", plan)
		} else if err != nil {
			return err
		}
		var err error
		out, err = tx.Q.TenantSetPlan(ctx, dbsqlc.TenantSetPlanParams{ID: tenantID, Plan: plan})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("tenant")
		}
		if err == nil {
			s.planChanged(tx)
		}
		return err
	})
	return out, err
}

// planChanged runs OnPlanChange after tx commits.
func (s *Service) planChanged(tx *db.Tx) {
	if s.OnPlanChange != nil {
		tx.AfterCommit(s.OnPlanChange)
	}
}
