package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// MaxSummaryRange bounds the time range of one summary.
const MaxSummaryRange = 400 * 24 * time.Hour

// Bucket is the usage of one group: its key (a UTC day "2006-01-02", a user id, a tenant id,
// "provider:model" or a run kind) and its sums.
type Bucket struct {
	Key          string
	Calls        int64
	InputTokens  int64
	OutputTokens int64
	CostMicros   int64
}

// Summary is the caller's tenant usage in [from, to) grouped by GroupDay, GroupUser, GroupModel
// or GroupRunKind: the whole tenant for ADMIN and above, the caller's own usage otherwise
// (grouped by user, that is one bucket). Keys of GroupUser are user ids.
func (s *Service) Summary(ctx context.Context, from, to time.Time, groupBy string) ([]Bucket, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	if err := checkRange(from, to); err != nil {
		return nil, err
	}
	switch groupBy {
	case GroupDay, GroupUser, GroupModel, GroupRunKind:
	default:
		return nil, apperr.Invalid("groupBy", "must be DAY, USER, MODEL or RUN_KIND")
	}
	user := uuid.NullUUID{}
	if !a.Role.AtLeast(auth.RoleAdmin) {
		user = uuid.NullUUID{UUID: a.UserID, Valid: true}
	}
	var rows []dbsqlc.UsageSummaryRow
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		lo, hi, err := rolledSpan(ctx, tx, from, to)
		if err != nil {
			return err
		}
		rows, err = tx.Q.UsageSummary(ctx, dbsqlc.UsageSummaryParams{
			GroupBy: groupBy, TenantID: a.TenantID, UserID: user, FromAt: from, Lo: lo, Hi: hi, ToAt: to,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Bucket, len(rows))
	for i, r := range rows {
		out[i] = Bucket(r)
	}
	return out, nil
}

// PlatformSummary is every tenant's usage in [from, to) grouped by GroupTenant, GroupDay or
// GroupModel, for platform admins only (FORBIDDEN otherwise). Keys of GroupTenant are tenant
// ids.
func (s *Service) PlatformSummary(ctx context.Context, from, to time.Time, groupBy string) ([]Bucket, error) {
	a, ok := auth.ActorFrom(ctx)
	if !ok {
		return nil, apperr.New(apperr.Unauthenticated, "authentication required")
	}
	if !a.PlatformAdmin {
		return nil, apperr.New(apperr.Forbidden, "platform admins only")
	}
	if err := checkRange(from, to); err != nil {
		return nil, err
	}
	switch groupBy {
	case GroupTenant, GroupDay, GroupModel:
	default:
		return nil, apperr.Invalid("groupBy", "must be TENANT, DAY or MODEL")
	}
	var rows []dbsqlc.UsagePlatformSummaryRow
	err := s.db.InSystemTx(ctx, "platform usage dashboard: usage of every tenant", func(ctx context.Context, tx *db.Tx) error {
		lo, hi, err := rolledSpan(ctx, tx, from, to)
		if err != nil {
			return err
		}
		rows, err = tx.Q.UsagePlatformSummary(ctx, dbsqlc.UsagePlatformSummaryParams{GroupBy: groupBy, FromAt: from, Lo: lo, Hi: hi, ToAt: to})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Bucket, len(rows))
	for i, r := range rows {
		out[i] = Bucket(r)
	}
	return out, nil
}

func checkRange(from, to time.Time) error {
	if !to.After(from) {
		return apperr.Invalid("to", "must be after from")
	}
	if to.Sub(from) > MaxSummaryRange {
		return apperr.Invalid("to", "the range may span at most 400 days")
	}
	return nil
}

// rolledSpan splits [from, to) for a summary: [lo, hi) are the whole UTC days that usage_daily
// holds (before rolled_through); [from, lo) and [hi, to) are read from usage_records. When no
// whole rolled-up day falls inside, lo = hi and everything is read raw.
func rolledSpan(ctx context.Context, tx *db.Tx, from, to time.Time) (lo, hi time.Time, err error) {
	through, err := tx.Q.UsageRollupState(ctx)
	if err != nil {
		return lo, hi, fmt.Errorf("read rollup state: %w", err)
	}
	return span(from, to, through)
}

func span(from, to, through time.Time) (lo, hi time.Time, err error) {
	from, to = from.UTC(), to.UTC()
	lo = dayStart(from)
	if lo.Before(from) {
		lo = lo.AddDate(0, 0, 1)
	}
	hi = dayStart(to)
	if through.Before(hi) {
		hi = dayStart(through.UTC())
	}
	if !lo.Before(hi) || lo.After(to) {
		// No whole rolled-up day: read everything raw ([from, lo) ∪ [lo, to) with hi = lo).
		lo = clampTime(lo, from, to)
		return lo, lo, nil
	}
	return lo, hi, nil
}

func dayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func clampTime(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

// RollupLag is how long after a UTC day ends before it is rolled up: usage records are written
// in short transactions, so none of that day commits later.
const RollupLag = time.Hour

// rollupMaxDays bounds the days one Rollup call rolls up.
const rollupMaxDays = 31

// Rollup rolls closed UTC days of usage records (every tenant) into usage_daily, one day per
// transaction, advancing the shared rolled_through mark; days without records are skipped. It
// returns how many days it rolled up. Running it concurrently or twice is harmless: the mark is
// locked, and a day's rollup is recomputed, never added twice.
func (s *Service) Rollup(ctx context.Context) (int, error) {
	target := dayStart(time.Now().Add(-RollupLag))
	days := 0
	for days < rollupMaxDays {
		more := false
		err := s.db.InSystemTx(ctx, "usage rollup: aggregate a closed day of every tenant's usage records", func(ctx context.Context, tx *db.Tx) error {
			through, err := tx.Q.UsageRollupStateLock(ctx)
			if err != nil {
				return fmt.Errorf("lock rollup state: %w", err)
			}
			through = through.UTC()
			if !through.Before(target) {
				return nil
			}
			first, err := tx.Q.UsageFirstRecordSince(ctx, through)
			if db.IsNoRows(err) || (err == nil && !dayStart(first).Before(target)) {
				// Nothing to roll up before target: the mark moves there at once.
				return tx.Q.UsageRollupStateSet(ctx, target)
			}
			if err != nil {
				return err
			}
			day := dayStart(first)
			if _, err := tx.Q.UsageRollupDay(ctx, day); err != nil {
				return fmt.Errorf("roll up %s: %w", day.Format(time.DateOnly), err)
			}
			days++
			more = true
			return tx.Q.UsageRollupStateSet(ctx, day.AddDate(0, 0, 1))
		})
		if err != nil || !more {
			return days, err
		}
	}
	return days, nil
}
