package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// ReservationTTL bounds a held reservation when the attempt that made it has no deadline: the
// sweeper releases it afterwards whatever its run says.
const ReservationTTL = 2 * time.Hour

// EstimateCut is the usage of a call cut before its provider reported it (OpenAI reports at
// the end of the stream): the request's estimated input, and about 4 characters per token of
// what came back.
func EstimateCut(req llm.Request, reply []llm.Block) llm.Usage {
	return llm.Usage{InputTokens: EstimateInput(req), OutputTokens: int64((len(llm.Message{Blocks: reply}.Text()) + 3) / 4)}
}

// EstimateInput is the worst-case input of a request in tokens: about 4 characters per token
// over the system prompt, the messages and the tool definitions, 1000 per image.
func EstimateInput(req llm.Request) int64 {
	chars, images := len(req.System), 0
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			switch b.Type {
			case llm.BlockText:
				chars += len(b.Text)
			case llm.BlockToolUse:
				chars += len(b.Name) + len(b.Input)
			case llm.BlockToolResult:
				chars += len(b.Content)
			case llm.BlockImage:
				images++
			}
		}
	}
	for _, t := range req.Tools {
		chars += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return int64((chars+3)/4) + int64(images)*1000
}

// WorstCase is what a call may cost at most: its estimated input plus its output cap, in tokens
// and in micro-dollars at the model's prices (no cache discount).
func WorstCase(m llm.Model, req llm.Request) (tokens, micros int64) {
	in := EstimateInput(req)
	out := int64(req.MaxTokens)
	if out <= 0 {
		out = int64(max(m.MaxOutput, 4096))
	}
	return in + out, m.Cost(llm.Usage{InputTokens: in, OutputTokens: out})
}

// Reserve holds the worst case of the call callIndex of the leased run on every budget that
// applies to its tenant and user, all or nothing, before the call is made (agent.Budgets). It
// reports whether a reservation is held. When a budget has no room it returns BUDGET_EXCEEDED
// (after marking the budget exceeded and sending budget.exceeded once per window); the executor
// then ends the run TERMINAL with terminationReason budget_exceeded. A later attempt of the run
// first releases what earlier attempts still hold, so a retried call is reserved once.
//
// The call reserves on its run's stripe of each budget; when a stripe is short of room, a
// second transaction decides on the budgets' totals and deals their remainders out again
// (reserveAll).
func (s *Service) Reserve(ctx context.Context, l run.Lease, callIndex int, m llm.Model, req llm.Request) (bool, error) {
	if !s.hasBudgets(ctx, l.Run.TenantID) {
		return false, nil
	}
	expires := time.Now().Add(ReservationTTL)
	if d, ok := ctx.Deadline(); ok {
		expires = d.Add(time.Minute)
	}
	tokens, micros := WorstCase(m, req)
	var held, short bool
	err := s.runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
		r := l.Run
		if l.Attempt > 1 {
			if _, err := tx.Q.ReservationRelease(ctx, dbsqlc.ReservationReleaseParams{
				TenantID: r.TenantID, RunID: r.ID, Earlier: true, Attempt: l.Attempt,
			}); err != nil {
				return fmt.Errorf("release reservations of earlier attempts: %w", err)
			}
		}
		var err error
		held, short, err = s.reserveStripe(ctx, tx, l, callIndex, tokens, micros, expires)
		return err
	})
	if err != nil || !short {
		return held, err
	}
	var refusal error
	err = s.runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
		var err error
		held, refusal, err = s.reserveAll(ctx, tx, l, callIndex, tokens, micros, expires)
		return err
	})
	if err != nil {
		return false, err
	}
	return held, refusal
}

// ReserveTx is Reserve inside tx, the transaction that acquires the run (agent.Budgets): the
// call reserves on the run's stripes; when one is short nothing is held and Reserve decides on
// the budgets' totals when the call is made.
func (s *Service) ReserveTx(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, m llm.Model, req llm.Request) (bool, error) {
	if l.Attempt != 1 || !s.hasBudgets(ctx, l.Run.TenantID) {
		return false, nil
	}
	expires := time.Now().Add(ReservationTTL)
	if d, ok := ctx.Deadline(); ok {
		expires = d.Add(time.Minute)
	}
	tokens, micros := WorstCase(m, req)
	held, _, err := s.reserveStripe(ctx, tx, l, callIndex, tokens, micros, expires)
	return held, err
}

// reserveStripe reserves on the run's stripe of every budget that applies (BudgetReserve):
// short reports a stripe without room, with nothing reserved.
func (s *Service) reserveStripe(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, tokens, micros int64, expires time.Time) (held, short bool, err error) {
	r := l.Run
	res, err := tx.Q.BudgetReserve(ctx, dbsqlc.BudgetReserveParams{
		TenantID: r.TenantID, UserID: r.UserID, Tokens: tokens, Micros: micros, ID: uuid.Must(uuid.NewV7()),
		RunID: r.ID, CallIndex: int32(callIndex), Attempt: l.Attempt, ExpiresAt: expires,
	})
	if err != nil {
		return false, false, fmt.Errorf("reserve budget: %w", err)
	}
	s.setPresence(r.TenantID, res.Budgets > 0)
	held = res.Reserved > 0
	if res.Ok && res.Budgets > 0 && !held {
		return false, false, errReservedAlready(callIndex, r.ID)
	}
	return held, !res.Ok, nil
}

// errReservedAlready is a reservation of a call that another attempt's reservation still holds,
// or that was settled: nothing is added twice.
func errReservedAlready(callIndex int, runID uuid.UUID) error {
	return fmt.Errorf("reserve budget: call %d of run %s is reserved or settled already", callIndex, runID)
}

// reserveAll reserves in tx on the budgets' totals (BudgetReserveAll), after the run's stripe
// was short: refusal is the BUDGET_EXCEEDED error of a budget without room (recorded in tx), err
// a failure that must roll tx back.
func (s *Service) reserveAll(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, tokens, micros int64, expires time.Time) (held bool, refusal, err error) {
	r := l.Run
	res, err := tx.Q.BudgetReserveAll(ctx, dbsqlc.BudgetReserveAllParams{
		TenantID: r.TenantID, UserID: r.UserID, Tokens: tokens, Micros: micros, ID: uuid.Must(uuid.NewV7()),
		RunID: r.ID, CallIndex: int32(callIndex), Attempt: l.Attempt, ExpiresAt: expires,
	})
	if err != nil {
		return false, nil, fmt.Errorf("reserve budget: %w", err)
	}
	held = res.Reserved > 0
	if res.Ok {
		if res.Budgets > 0 && !held {
			return false, nil, errReservedAlready(callIndex, r.ID)
		}
		return held, nil, nil
	}
	// Refused: nothing was reserved; mark (and announce, once per window) what refused.
	refused, err := tx.Q.BudgetRefuse(ctx, dbsqlc.BudgetRefuseParams{TenantID: r.TenantID, UserID: r.UserID, Tokens: tokens, Micros: micros})
	if err != nil {
		return false, nil, fmt.Errorf("mark budget exceeded: %w", err)
	}
	var evs []events.Event
	for _, b := range refused {
		// A refusal is the budget used up: its 100% threshold, once per window.
		key := thresholdKey(b.ID, PeriodStart(b.Period, time.Now()), 100)
		if _, err := tx.Q.CostAlertClaim(ctx, dbsqlc.CostAlertClaimParams{TenantID: r.TenantID, Key: key}); err == nil {
			s.metrics.Alert(EventBudgetThreshold)
			evs = append(evs, s.thresholdEvent(r.TenantID, Budget{ID: b.ID, Scope: b.Scope, UserID: b.UserID.UUID, Period: b.Period,
				TokenLimit: b.TokenLimit, CostLimitMicros: b.CostLimitMicros, SpentTokens: b.SpentTokens, SpentMicros: b.SpentMicros,
				ReservedTokens: b.ReservedTokens, ReservedMicros: b.ReservedMicros}, 100))
		} else if !db.IsNoRows(err) {
			return false, nil, fmt.Errorf("claim budget alert: %w", err)
		}
		if b.Notify {
			evs = append(evs, s.budgetEvent(r.TenantID, EventBudgetExceeded, r.ID, "reservation refused", budgetData{
				ID: b.ID, Scope: b.Scope, UserID: b.UserID, Period: b.Period, TokenLimit: b.TokenLimit, CostLimitMicros: b.CostLimitMicros,
				SpentTokens: b.SpentTokens, SpentMicros: b.SpentMicros, ReservedTokens: b.ReservedTokens, ReservedMicros: b.ReservedMicros,
			}))
		}
	}
	s.publishAfter(ctx, tx, r.TenantID, evs)
	scope, period := ScopeTenant, PeriodDay
	if len(refused) > 0 {
		scope, period = refused[0].Scope, refused[0].Period
	}
	tx.AfterCommit(func() { s.metrics.BudgetRefused("reservation", scope) })
	return false, exceeded(scope, period), nil
}

// Settle moves the call's reservation into spent with its actual usage, inside tx: the
// transaction that stores the call's reply and usage record (agent.Budgets). It happens at most
// once per call; the actual usage is added to the run's stripe of every budget applying now, and
// what the reservation held there is given back. Actual usage above the reservation is the
// overage: it is recorded on the reservation and spent, and the next admission or reservation is
// refused: an overage that leaves the stripe above its allowance deals the budget out again
// after commit (redeal). The first settlement to find 80% or 100% of a limit spent in the window
// sends budget.warning / budget.exceeded after commit. It is one statement; the executor runs it
// last in its transaction, so the stripes' locks are held only until the commit.
func (s *Service) Settle(ctx context.Context, tx *db.Tx, l run.Lease, callIndex int, u llm.Usage, costMicros int64) error {
	r := l.Run
	rows, err := tx.Q.BudgetSettle(ctx, dbsqlc.BudgetSettleParams{
		TenantID: r.TenantID, RunID: r.ID, CallIndex: int32(callIndex),
		Tokens: u.InputTokens + u.OutputTokens, Micros: costMicros, UserID: r.UserID,
	})
	if err != nil {
		return fmt.Errorf("settle budgets: %w", err)
	}
	var evs []events.Event
	var over []uuid.UUID
	for _, b := range rows {
		if b.Over {
			over = append(over, b.ID)
		}
		if !b.Warn && !b.Exceed {
			continue
		}
		d := budgetData{ID: b.ID, Scope: b.Scope, UserID: b.UserID, Period: b.Period, TokenLimit: b.TokenLimit, CostLimitMicros: b.CostLimitMicros,
			SpentTokens: b.SpentTokens, SpentMicros: b.SpentMicros, ReservedTokens: b.ReservedTokens, ReservedMicros: b.ReservedMicros}
		if b.Warn {
			evs = append(evs, s.budgetEvent(r.TenantID, EventBudgetWarning, r.ID, "80% of a limit spent", d))
		}
		if b.Exceed {
			evs = append(evs, s.budgetEvent(r.TenantID, EventBudgetExceeded, r.ID, "limit reached", d))
		}
	}
	s.publishAfter(ctx, tx, r.TenantID, evs)
	tx.AfterCommit(func() { s.kickAlerts(ctx, r.TenantID) })
	if len(over) > 0 {
		tx.AfterCommit(func() { s.redeal(db.Detach(context.WithoutCancel(ctx)), r.TenantID, over) })
	}
	return nil
}

// redeal deals the budgets out over their stripes again after an overage left one of their
// stripes above its allowance, so that the other stripes stop admitting calls the budget has no
// room for (with nothing left, none has room, and every call takes the slow path and is
// refused). Until it commits, calls on other stripes may still be reserved by their allowances;
// when it fails, the next slow path of the budget deals it out instead.
func (s *Service) redeal(ctx context.Context, tenantID uuid.UUID, budgets []uuid.UUID) {
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		for _, id := range budgets { // in id order, as BudgetSettle returns them
			if err := tx.Q.BudgetLock(ctx, dbsqlc.BudgetLockParams{TenantID: tenantID, ID: id}); err != nil {
				return err
			}
			if err := tx.Q.BudgetStripesSet(ctx, dbsqlc.BudgetStripesSetParams{TenantID: tenantID, ID: id}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "deal a budget out again after an overage", "tenant_id", tenantID.String(), "error", err)
	}
}

// Release gives back the reservation of a call that failed or was cancelled, made by the
// leased attempt (a stale worker therefore never releases its successor's). It is a no-op when
// the reservation was settled or released already.
func (s *Service) Release(ctx context.Context, l run.Lease, callIndex int) error {
	r := l.Run
	idx := int32(callIndex)
	return s.db.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.ReservationRelease(ctx, dbsqlc.ReservationReleaseParams{
			TenantID: r.TenantID, RunID: r.ID, CallIndex: &idx, Attempt: l.Attempt,
		})
		return err
	})
}

// SweepBatch is how many dead reservations one sweep releases at most.
const SweepBatch = 500

// ReleaseDead releases the held reservations of dead runs across every tenant: runs that are
// gone, no longer RUNNING, taken over by a newer attempt, or whose lease (or the reservation's
// own deadline) expired. Each is released exactly once. It returns how many it released.
func (s *Service) ReleaseDead(ctx context.Context) (int, error) {
	total := 0
	for {
		var rows []dbsqlc.ReservationReleaseDeadRow
		err := s.db.InSystemTx(ctx, "usage sweeper: release reservations of dead runs in every tenant", func(ctx context.Context, tx *db.Tx) error {
			var err error
			rows, err = tx.Q.ReservationReleaseDead(ctx, SweepBatch)
			return err
		})
		if err != nil {
			return total, err
		}
		for _, r := range rows {
			s.log.InfoContext(ctx, "released the reservation of a dead run", "tenant_id", r.TenantID.String(), "run_id", r.RunID.String(), "call_index", r.CallIndex)
		}
		total += len(rows)
		if len(rows) < SweepBatch {
			return total, nil
		}
	}
}

// budgetData is the data of a budget event.
type budgetData struct {
	ID              uuid.UUID     `json:"budgetId"`
	Scope           string        `json:"scope"`
	UserID          uuid.NullUUID `json:"userId"`
	Period          string        `json:"period"`
	TokenLimit      *int64        `json:"tokenLimit"`
	CostLimitMicros *int64        `json:"costLimitMicros"`
	SpentTokens     int64         `json:"spentTokens"`
	SpentMicros     int64         `json:"spentMicros"`
	ReservedTokens  int64         `json:"reservedTokens"`
	ReservedMicros  int64         `json:"reservedMicros"`
	RunID           uuid.UUID     `json:"runId"`
	Reason          string        `json:"reason"`
}

// budgetEvent is a tenant event (no run of its own: RunID is uuid.Nil, seq 0); the run whose call
// caused it is in its data.
func (s *Service) budgetEvent(tenantID uuid.UUID, typ string, runID uuid.UUID, reason string, d budgetData) events.Event {
	d.RunID, d.Reason = runID, reason
	raw, _ := json.Marshal(d)
	return events.Event{TenantID: tenantID, Type: typ, Data: raw, Timestamp: time.Now().UTC()}
}

// publishAfter sends tenant events once tx commits.
func (s *Service) publishAfter(ctx context.Context, tx *db.Tx, tenantID uuid.UUID, evs []events.Event) {
	if len(evs) == 0 {
		return
	}
	if err := s.pub.Tap(ctx, tx, evs); err != nil {
		// The statement's failure fails the transaction (and so the call that made the events).
		s.log.WarnContext(ctx, "webhook deliveries of budget events", "tenant_id", tenantID.String(), "error", err)
	}
	tx.AfterCommit(func() { s.pub.Publish(context.WithoutCancel(ctx), tenantID, evs...) })
}
