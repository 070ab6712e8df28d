package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// Cost alert events, on the tenant's activity stream and to its webhooks.
const (
	// EventBudgetThreshold: a budget's spending in its window reached 50, 80 or 100% of a limit
	// (100% also when a reservation was refused). Once per budget, window and threshold.
	EventBudgetThreshold = "budget.threshold"
	// EventBudgetRunaway: the tenant's spend over the last 10 minutes exceeds RunawayFactor
	// times its trailing hourly average's 10-minute share. Once per 10-minute window.
	EventBudgetRunaway = "budget.runaway"
)

// Thresholds are the percentages of a limit that raise budget.threshold.
var Thresholds = []int{50, 80, 100}

// RunawayWindow is the recent window of the runaway-cost alert; the trailing average is taken
// over the hour before it.
const RunawayWindow = 10 * time.Minute

// AlertInterval is the least time between two alert checks of one tenant: a settlement made
// meanwhile is checked when it has passed, so a busy tenant costs one check a second.
const AlertInterval = time.Second

// RunawayInterval is the least time between two runaway checks of a tenant in the background,
// however its settlements are spaced: the check sums the cost of the tenant's usage records of
// the trailing 70 minutes, and an alert about a 10-minute window may come a minute late.
const RunawayInterval = time.Minute

// alerts runs the alert checks of each tenant in the background, at most one at a time and one
// per AlertInterval; a check asked for meanwhile runs once the interval has passed.
type alerts struct {
	mu      sync.Mutex
	running map[uuid.UUID]bool // tenant -> another check was asked for meanwhile
	// runawayAt is when a tenant's last runaway check ran, kept across the loops kickAlerts
	// starts and ends (a tenant settling every 2 s starts one per settlement); an entry goes
	// once its check is due again.
	runawayAt map[uuid.UUID]time.Time
	stop      chan struct{}
	stopped   bool
	wg        sync.WaitGroup
}

// kickAlerts checks the tenant's cost alerts in the background, after a settlement committed.
func (s *Service) kickAlerts(ctx context.Context, tenantID uuid.UUID) {
	a := &s.alerts
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	if a.running == nil {
		a.running = map[uuid.UUID]bool{}
		a.stop = make(chan struct{})
	}
	if _, busy := a.running[tenantID]; busy {
		a.running[tenantID] = true
		a.mu.Unlock()
		return
	}
	a.running[tenantID] = false
	a.wg.Add(1)
	stop := a.stop
	a.mu.Unlock()
	ctx = db.Detach(context.WithoutCancel(ctx))
	go func() {
		defer a.wg.Done()
		for {
			if _, err := s.checkAlerts(ctx, tenantID, a.runawayDue(tenantID, time.Now())); err != nil {
				s.log.WarnContext(ctx, "check cost alerts", "tenant_id", tenantID.String(), "error", err)
			}
			t := time.NewTimer(AlertInterval)
			select {
			case <-stop:
			case <-t.C:
			}
			t.Stop()
			a.mu.Lock()
			if !a.running[tenantID] || a.stopped {
				delete(a.running, tenantID)
				if time.Since(a.runawayAt[tenantID]) >= RunawayInterval {
					delete(a.runawayAt, tenantID) // due anyway: the entry need not stay
				}
				a.mu.Unlock()
				return
			}
			a.running[tenantID] = false
			a.mu.Unlock()
		}
	}()
}

// runawayDue reports whether the tenant's runaway check is due at now (none in the
// RunawayInterval before), and if so takes it.
func (a *alerts) runawayDue(tenantID uuid.UUID, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if last, ok := a.runawayAt[tenantID]; ok && now.Sub(last) < RunawayInterval {
		return false
	}
	if a.runawayAt == nil {
		a.runawayAt = map[uuid.UUID]time.Time{}
	}
	a.runawayAt[tenantID] = now
	return true
}

// StopAlerts ends the background alert checks and waits for a running one (graceful stop): a
// check that was still due runs on the tenant's next settlement.
func (s *Service) StopAlerts() {
	a := &s.alerts
	a.mu.Lock()
	if !a.stopped {
		a.stopped = true
		if a.stop != nil {
			close(a.stop)
		}
	}
	a.mu.Unlock()
	a.wg.Wait()
}

type thresholdData struct {
	budgetData
	Threshold int `json:"threshold"`
}

// CheckAlerts raises the cost alerts the tenant's spending calls for and has not had yet: a
// budget.threshold per budget, window and threshold reached, and budget.runaway once per
// 10-minute window. Each alert is claimed by its key in cost_alerts in the transaction that
// sends it (to webhooks, and to the activity stream after commit), so racing checks send each
// once. It returns the events it sent.
func (s *Service) CheckAlerts(ctx context.Context, tenantID uuid.UUID) ([]events.Event, error) {
	return s.checkAlerts(ctx, tenantID, true)
}

// checkAlerts is CheckAlerts, with the runaway check only when runaway is true.
func (s *Service) checkAlerts(ctx context.Context, tenantID uuid.UUID, runaway bool) ([]events.Event, error) {
	var evs []events.Event
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		evs = nil
		claim := func(key string) (bool, error) {
			_, err := tx.Q.CostAlertClaim(ctx, dbsqlc.CostAlertClaimParams{TenantID: tenantID, Key: key})
			if db.IsNoRows(err) {
				return false, nil
			}
			return err == nil, err
		}
		if s.hasBudgets(ctx, tenantID) {
			rows, err := tx.Q.BudgetList(ctx, dbsqlc.BudgetListParams{TenantID: tenantID})
			if err != nil {
				return fmt.Errorf("list budgets: %w", err)
			}
			for _, r := range rows {
				b := budgetOf(dbsqlc.BudgetGetRow(r))
				pct := spentPercent(b)
				for _, th := range Thresholds {
					if pct < th {
						break
					}
					ok, err := claim(thresholdKey(b.ID, b.PeriodStart, th))
					if err != nil {
						return err
					}
					if ok {
						evs = append(evs, s.thresholdEvent(tenantID, b, th))
					}
				}
			}
		}
		if s.runaway > 0 && runaway {
			now := time.Now()
			w, err := tx.Q.UsageCostWindows(ctx, dbsqlc.UsageCostWindowsParams{TenantID: tenantID,
				Recent: now.Add(-RunawayWindow), Since: now.Add(-RunawayWindow - time.Hour)})
			if err != nil {
				return err
			}
			recent, hour := w.RecentMicros, w.SinceMicros-w.RecentMicros
			// The hour's average per 10 minutes; a tenant without a trailing hour has no average
			// to run away from.
			share := hour * int64(RunawayWindow) / int64(time.Hour)
			if hour > 0 && recent > int64(s.runaway)*share {
				window := now.Truncate(RunawayWindow)
				ok, err := claim("runaway:" + window.UTC().Format(time.RFC3339))
				if err != nil {
					return err
				}
				if ok {
					raw, _ := json.Marshal(map[string]any{
						"recentMicros": recent, "trailingHourMicros": hour, "factor": s.runaway,
						"windowMinutes": int(RunawayWindow / time.Minute),
					})
					evs = append(evs, events.Event{TenantID: tenantID, Type: EventBudgetRunaway, Data: raw, Timestamp: now.UTC()})
				}
			}
		}
		for _, e := range evs {
			s.metrics.Alert(e.Type)
		}
		s.publishAfter(ctx, tx, tenantID, evs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// spentPercent is how much of its tightest limit a budget has spent in its window, in percent.
func spentPercent(b Budget) int {
	pct := 0
	if b.TokenLimit != nil {
		pct = max(pct, percent(b.SpentTokens, *b.TokenLimit))
	}
	if b.CostLimitMicros != nil {
		pct = max(pct, percent(b.SpentMicros, *b.CostLimitMicros))
	}
	return pct
}

func percent(spent, limit int64) int {
	if limit <= 0 {
		return 100
	}
	return int(min(spent*100/limit, 1000))
}

// PeriodStart is the start of the UTC day or month (period) that at falls in, as Postgres's
// agentry_period_start computes it.
func PeriodStart(period string, at time.Time) time.Time {
	at = at.UTC()
	if period == PeriodDay {
		return time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	}
	return time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func thresholdKey(budgetID uuid.UUID, periodStart time.Time, th int) string {
	return fmt.Sprintf("threshold:%s:%d:%d", budgetID, periodStart.Unix(), th)
}

func (s *Service) thresholdEvent(tenantID uuid.UUID, b Budget, th int) events.Event {
	d := thresholdData{budgetData: budgetData{ID: b.ID, Scope: b.Scope, UserID: uuid.NullUUID{UUID: b.UserID, Valid: b.UserID != uuid.Nil}, Period: b.Period,
		TokenLimit: b.TokenLimit, CostLimitMicros: b.CostLimitMicros, SpentTokens: b.SpentTokens, SpentMicros: b.SpentMicros,
		ReservedTokens: b.ReservedTokens, ReservedMicros: b.ReservedMicros, Reason: fmt.Sprintf("%d%% of a limit spent", th)}, Threshold: th}
	raw, _ := json.Marshal(d)
	return events.Event{TenantID: tenantID, Type: EventBudgetThreshold, Data: raw, Timestamp: time.Now().UTC()}
}
