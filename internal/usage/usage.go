// Package usage is metering and cost control: budgets per tenant and per user enforced by
// reserve-then-settle around every LLM call, admission of new runs, the sweeper that gives back
// the reservations of dead runs, budget events, GCRA rate limits in Redis, and the aggregates
// the admin dashboards read (usage summaries, platform usage, tenant activity). See
// ARCHITECTURE.md.
//
// Usage records themselves (one per LLM call, unique per run and call index) are written by the
// executor with the call's reply; this package settles budgets in that same transaction.
package usage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/run"
)

// Event types this package sends on the tenant activity channel.
const (
	// EventBudgetWarning: a budget's spending reached 80% of a limit (once per window).
	EventBudgetWarning = "budget.warning"
	// EventBudgetExceeded: a budget's spending reached a limit, or a reservation was refused
	// (once per window).
	EventBudgetExceeded = "budget.exceeded"
)

// Scopes and periods of a budget.
const (
	ScopeTenant  = "TENANT"
	ScopeUser    = "USER"
	PeriodDay    = "DAY"
	PeriodMonth  = "MONTH"
	GroupDay     = "DAY"
	GroupUser    = "USER"
	GroupModel   = "MODEL"
	GroupRunKind = "RUN_KIND"
	GroupTenant  = "TENANT"
)

// presenceTTL is how long a process trusts what it learnt about whether a tenant has any budget
// (the executor skips the reservation transaction of tenants without one). A budget made in
// another process is enforced by reservations at most this long after it was made; its spend
// counts from the start of its window regardless (setBudget and every settle count it).
const presenceTTL = 2 * time.Second

// Service is the usage domain. The zero value is not usable; call NewService.
type Service struct {
	db   *db.DB
	runs *run.Service
	pub  *events.Publisher
	log  *slog.Logger
	// metrics counts budget refusals and cost alerts (nil: not counted).
	metrics *metrics.Metrics
	// runaway is the runaway-cost alert's factor (0: off); alerts runs the checks.
	runaway int
	alerts  alerts

	mu       sync.Mutex
	presence map[uuid.UUID]presenceEntry
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithMetrics makes the service count budget refusals and cost alerts.
func WithMetrics(m *metrics.Metrics) Option { return func(s *Service) { s.metrics = m } }

// WithRunawayFactor sets the runaway-cost alert's factor (0, the default, turns it off).
func WithRunawayFactor(n int) Option { return func(s *Service) { s.runaway = n } }

type presenceEntry struct {
	has     bool
	expires time.Time
}

// NewService returns the usage service. runs fences the executor's reservations and gives the
// event publisher.
func NewService(d *db.DB, runs *run.Service, log *slog.Logger, options ...Option) *Service {
	s := &Service{db: d, runs: runs, pub: runs.Publisher(), log: log, presence: map[uuid.UUID]presenceEntry{}}
	for _, o := range options {
		o(s)
	}
	return s
}

// hasBudgets reports whether the tenant has any budget, from a short-lived cache. When in doubt
// (an error) it says yes: the reservation statement then decides.
func (s *Service) hasBudgets(ctx context.Context, tenantID uuid.UUID) bool {
	if has, known := s.presenceOf(tenantID); known {
		return has
	}
	var has bool
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		has, err = tx.Q.BudgetExists(ctx, tenantID)
		return err
	})
	if err != nil {
		return true
	}
	s.setPresence(tenantID, has)
	return has
}

// presenceOf reports what the cache knows of whether the tenant has any budget (known is false
// when it has nothing fresh).
func (s *Service) presenceOf(tenantID uuid.UUID) (has, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.presence[tenantID]
	if !ok || !time.Now().Before(e.expires) {
		return false, false
	}
	return e.has, true
}

func (s *Service) setPresence(tenantID uuid.UUID, has bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.presence) > 10_000 {
		s.presence = map[uuid.UUID]presenceEntry{} // bounded: a cache, not a registry
	}
	s.presence[tenantID] = presenceEntry{has: has, expires: time.Now().Add(presenceTTL)}
}
