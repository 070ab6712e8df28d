package usage_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/usage"
)

// fakeJobs stands in for River: runs get job ids, nothing is worked.
type fakeJobs struct{ next atomic.Int64 }

func (f *fakeJobs) InsertTx(context.Context, pgx.Tx, river.JobArgs, *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	return &rivertype.JobInsertResult{Job: &rivertype.JobRow{ID: f.next.Add(1)}}, nil
}

func (f *fakeJobs) JobCancelTx(context.Context, pgx.Tx, int64) (*rivertype.JobRow, error) {
	return &rivertype.JobRow{}, nil
}

func (f *fakeJobs) JobList(context.Context, *river.JobListParams) (*river.JobListResult, error) {
	return &river.JobListResult{}, nil
}

// bundle is one test's world: a fresh database, the services, a tenant with an admin and a
// member, and an owner connection to look at the tables directly.
type bundle struct {
	db       *db.DB
	ownerURL string
	rdb      *redis.Client
	runs     *run.Service
	svc      *usage.Service
	tenant   uuid.UUID
	admin    uuid.UUID
	member   uuid.UUID
}

func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func setup(t testing.TB) *bundle {
	t.Helper()
	d, ownerURL := dbtest.Open(t)
	rdb := redisClient(t)
	log := slog.New(slog.DiscardHandler)
	runs := run.NewService(d, events.NewPublisher(rdb, fmt.Sprintf("usagetest%d:", time.Now().UnixNano()), log), log)
	runs.SetInserter(&fakeJobs{})
	b := &bundle{db: d, ownerURL: ownerURL, rdb: rdb, runs: runs, svc: usage.NewService(d, runs, log)}
	b.tenant, b.admin, b.member = b.newTenant(t)
	return b
}

// newTenant makes a tenant with an OWNER (returned as admin) and a MEMBER.
func (b *bundle) newTenant(t testing.TB) (tenant, admin, member uuid.UUID) {
	t.Helper()
	tenant, admin, member = uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	require.NoError(t, b.db.InTx(context.Background(), tenant, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenant, Name: "t"}); err != nil {
			return err
		}
		for u, role := range map[uuid.UUID]string{admin: "OWNER", member: "MEMBER"} {
			if _, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: u, Email: u.String() + "@example.com"}); err != nil {
				return err
			}
			if _, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: tenant, UserID: u, Role: role}); err != nil {
				return err
			}
		}
		return nil
	}))
	return tenant, admin, member
}

func (b *bundle) as(user uuid.UUID, role auth.Role) context.Context {
	return auth.WithActor(context.Background(), auth.Actor{UserID: user, TenantID: b.tenant, Role: role})
}

// lease makes a RUNNING run of user, held by a worker.
func (b *bundle) lease(t testing.TB, user uuid.UUID) run.Lease {
	t.Helper()
	ctx := context.Background()
	var r dbsqlc.Run
	require.NoError(t, b.db.InTx(ctx, b.tenant, func(ctx context.Context, tx *db.Tx) error {
		var err error
		r, err = tx.Q.RunInsert(ctx, dbsqlc.RunInsertParams{TenantID: b.tenant, ID: uuid.Must(uuid.NewV7()), UserID: user, Kind: run.KindChatTurn, Status: run.StatusQueued, MaxAttempts: 4})
		if err != nil {
			return err
		}
		return b.runs.Enqueue(ctx, tx, r)
	}))
	return b.acquire(t, r.ID)
}

func (b *bundle) acquire(t testing.TB, runID uuid.UUID) run.Lease {
	t.Helper()
	var job int64
	require.NoError(t, b.db.InTx(context.Background(), b.tenant, func(ctx context.Context, tx *db.Tx) error {
		r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: b.tenant, ID: runID})
		job = *r.JobID
		return err
	}))
	l, err := b.runs.Acquire(context.Background(), b.tenant, runID, "worker", job)
	require.NoError(t, err)
	return l
}

// setBudget sets a budget as the tenant's owner.
func (b *bundle) setBudget(t testing.TB, in usage.SetBudget) usage.Budget {
	t.Helper()
	out, err := b.svc.SetBudget(b.as(b.admin, auth.RoleOwner), in)
	require.NoError(t, err)
	return out
}

func ptr[T any](v T) *T { return &v }

// model prices calls at gpt-4o-mini's catalogue prices.
var model = llm.Lookup("openai", "gpt-4o-mini")

// request is a call whose worst case is 100 + out tokens.
func request(out int) llm.Request {
	return llm.Request{Model: model.ID, System: strings.Repeat("x", 400), MaxTokens: out}
}

// complete stores the call's usage record and settles it, as the executor's persistReply does.
func (b *bundle) complete(t testing.TB, l run.Lease, idx int, in, out int64) error {
	t.Helper()
	u := llm.Usage{InputTokens: in, OutputTokens: out}
	return b.runs.InFence(context.Background(), l, func(ctx context.Context, tx *db.Tx) error {
		cost := model.Cost(u)
		if _, err := tx.Q.UsageRecordInsert(ctx, dbsqlc.UsageRecordInsertParams{
			TenantID: l.Run.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: l.Run.ID, UserID: l.Run.UserID, RunKind: l.Run.Kind,
			CallIndex: int32(idx), Provider: "openai", Model: model.ID, InputTokens: in, OutputTokens: out, CostMicros: cost,
		}); err != nil {
			return err
		}
		return b.svc.Settle(ctx, tx, l, idx, u, cost)
	})
}

// owner runs fn on the owner connection in a system-scoped transaction (every tenant's rows).
func (b *bundle) owner(t testing.TB, fn func(tx pgx.Tx)) {
	t.Helper()
	tx, done := b.ownerTx(t)
	defer done()
	fn(tx)
	require.NoError(t, tx.Commit(context.Background()))
}

// ownerTx begins a system-scoped transaction on a new owner connection; done rolls it back
// (unless committed) and closes the connection.
func (b *bundle) ownerTx(t testing.TB) (tx pgx.Tx, done func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.ownerURL)
	require.NoError(t, err)
	closeConn := func() { _ = conn.Close(ctx) }
	tx, err = conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
	}
	if err != nil {
		closeConn()
		require.NoError(t, err)
	}
	return tx, func() { _ = tx.Rollback(ctx); closeConn() }
}

func (b *bundle) scalar(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	b.owner(t, func(tx pgx.Tx) { require.NoError(t, tx.QueryRow(context.Background(), sql, args...).Scan(&n)) })
	return n
}

func (b *bundle) budget(t testing.TB, id uuid.UUID) usage.Budget {
	t.Helper()
	out, err := b.svc.Budget(b.as(b.admin, auth.RoleOwner), id)
	require.NoError(t, err)
	return out
}

// TestConcurrentReservationsNeverOverspend: 200 workers reserve, "call" and settle against a
// token budget that fits about 20 calls. A watcher polling every 10 ms never sees spent +
// reserved above the limit; the final spend is within it; every refusal is BUDGET_EXCEEDED; no
// reservation is left.
func TestConcurrentReservationsNeverOverspend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 20_000 // worst case 1000 per call, actual 900 (100 in + 800 out)
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(limit))})
	leases := make([]run.Lease, 200)
	for i := range leases {
		leases[i] = b.lease(t, b.member)
	}

	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		conn, err := pgx.Connect(context.Background(), b.ownerURL)
		if err != nil {
			watched <- err
			return
		}
		defer conn.Close(context.Background())
		polls := 0
		for {
			select {
			case <-stop:
				if polls < 10 {
					watched <- fmt.Errorf("only %d polls", polls)
					return
				}
				watched <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
			var spent, reserved, lim int64
			err := pgx.BeginFunc(context.Background(), conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(context.Background(), `SELECT set_config('app.system', 'on', true)`); err != nil {
					return err
				}
				return tx.QueryRow(context.Background(), `SELECT spent_tokens, reserved_tokens, token_limit FROM budget_totals WHERE id = $1`, bud.ID).Scan(&spent, &reserved, &lim)
			})
			if err != nil {
				watched <- err
				return
			}
			polls++
			if spent+reserved > lim {
				watched <- fmt.Errorf("spent %d + reserved %d > limit %d", spent, reserved, lim)
				return
			}
		}
	}()

	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(leases))
	for _, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := b.svc.Reserve(context.Background(), l, 0, model, request(900))
			if err != nil {
				if apperr.CodeOf(err) != apperr.BudgetExceeded {
					errs <- fmt.Errorf("reserve: %w", err)
				}
				refused.Add(1)
				return
			}
			if !held {
				errs <- fmt.Errorf("admitted without a reservation")
				return
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // the model call
			if err := b.complete(t, l, 0, 100, 800); err != nil {
				errs <- fmt.Errorf("settle: %w", err)
				return
			}
			ok.Add(1)
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, <-watched)

	final := b.budget(t, bud.ID)
	require.Equal(t, ok.Load()*900, final.SpentTokens, "spent is the sum of the settled calls")
	require.LessOrEqual(t, final.SpentTokens, int64(limit))
	require.Zero(t, final.ReservedTokens, "no reservation left")
	require.Zero(t, b.scalar(t, `SELECT count(*) FROM reservations WHERE status = 'HELD'`))
	require.Equal(t, int64(200), ok.Load()+refused.Load())
	// About 20 fit: at least 19 (the last reservations may not fit beside the final spend), at
	// most limit / 900.
	require.GreaterOrEqual(t, ok.Load(), int64(19))
	require.LessOrEqual(t, ok.Load(), int64(limit/900))
	t.Logf("settled %d calls, refused %d", ok.Load(), refused.Load())
	// Another call of the same size fits only if there is room for its worst case; new runs are
	// refused only once nothing at all is left.
	_, err := b.svc.Reserve(context.Background(), b.lease(t, b.member), 0, model, request(900))
	if final.SpentTokens+1000 > limit {
		require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err))
	} else {
		require.NoError(t, err)
	}
	err = b.db.InTx(context.Background(), b.tenant, func(ctx context.Context, tx *db.Tx) error {
		return b.svc.Admit(ctx, tx, b.tenant, b.member)
	})
	require.NoError(t, err, "something is left: admitted")
}

// TestOverageIsRecordedAndRefusesNext: a call that reports more tokens than it reserved is
// settled in full (the overage recorded); the budget then refuses admission and the next
// reservation. The overspend is at most that call's overage.
func TestOverageIsRecordedAndRefusesNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 3000
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeUser, UserID: b.member, Period: usage.PeriodMonth, TokenLimit: ptr(int64(limit))})
	l := b.lease(t, b.member)
	held, err := b.svc.Reserve(context.Background(), l, 0, model, request(1000)) // reserves 1100
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, int64(1100), b.budget(t, bud.ID).ReservedTokens)
	require.NoError(t, b.complete(t, l, 0, 100, 3400)) // 3500 actual: 2400 over the reservation

	got := b.budget(t, bud.ID)
	require.Equal(t, int64(3500), got.SpentTokens)
	require.Zero(t, got.ReservedTokens)
	var reserved, actual int64
	b.owner(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT reserved_tokens, actual_tokens FROM reservations WHERE run_id = $1`, l.Run.ID).Scan(&reserved, &actual))
	})
	require.Equal(t, int64(2400), actual-reserved, "the overage is recorded on the reservation")
	require.LessOrEqual(t, got.SpentTokens-limit, actual-reserved, "overspend at most one call's overage")

	err = b.db.InTx(context.Background(), b.tenant, func(ctx context.Context, tx *db.Tx) error {
		return b.svc.Admit(ctx, tx, b.tenant, b.member)
	})
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err), "the next admission is refused")
	_, err = b.svc.Reserve(context.Background(), l, 1, model, request(10))
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err), "and the next call")
	// Another user's runs are not limited by this user's budget.
	l2 := b.lease(t, b.admin)
	held, err = b.svc.Reserve(context.Background(), l2, 0, model, request(10))
	require.NoError(t, err)
	require.False(t, held, "no budget applies to the admin")
}

// TestCostLimitAndSettleOnce: cost limits refuse like token limits; settling the same call twice
// (a retried transaction) counts it once.
func TestCostLimitAndSettleOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	worst, micros := usage.WorstCase(model, request(1000))
	require.Equal(t, int64(1100), worst)
	require.Positive(t, micros)
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, CostLimitMicros: ptr(2 * micros)})
	l := b.lease(t, b.member)
	_, err := b.svc.Reserve(context.Background(), l, 0, model, request(1000))
	require.NoError(t, err)
	_, err = b.svc.Reserve(context.Background(), l, 1, model, request(1000))
	require.NoError(t, err)
	_, err = b.svc.Reserve(context.Background(), l, 2, model, request(1000))
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err), "a third worst case does not fit the cost limit")
	require.Equal(t, 2*micros, b.budget(t, bud.ID).ReservedMicros)

	u := llm.Usage{InputTokens: 100, OutputTokens: 200}
	for range 2 {
		require.NoError(t, b.runs.InFence(context.Background(), l, func(ctx context.Context, tx *db.Tx) error {
			return b.svc.Settle(ctx, tx, l, 0, u, model.Cost(u))
		}))
	}
	got := b.budget(t, bud.ID)
	require.Equal(t, model.Cost(u), got.SpentMicros, "settled once")
	require.Equal(t, micros, got.ReservedMicros, "only call 0's reservation was given back")
	require.NoError(t, b.svc.Release(context.Background(), l, 1))
	require.NoError(t, b.svc.Release(context.Background(), l, 1))
	require.Zero(t, b.budget(t, bud.ID).ReservedMicros, "released once")
}

// TestRetriedAttemptReservesOnce: a worker dies holding a reservation; the next attempt of the
// run reserving the same call first gives the old one back, so the call is held once.
func TestRetriedAttemptReservesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodMonth, TokenLimit: ptr(int64(100_000))})
	first := b.lease(t, b.member)
	_, err := b.svc.Reserve(context.Background(), first, 0, model, request(1000))
	require.NoError(t, err)
	// The worker dies; the run is taken over by a new attempt.
	second := b.acquire(t, first.Run.ID)
	require.Greater(t, second.Attempt, first.Attempt)
	_, err = b.svc.Reserve(context.Background(), second, 0, model, request(2000))
	require.NoError(t, err)
	require.Equal(t, int64(2100), b.budget(t, bud.ID).ReservedTokens, "held once, by the new attempt")
	// The stale worker can neither settle nor release the new attempt's reservation.
	require.ErrorIs(t, b.complete(t, first, 0, 1, 1), run.ErrFenced)
	require.NoError(t, b.svc.Release(context.Background(), first, 0))
	require.Equal(t, int64(2100), b.budget(t, bud.ID).ReservedTokens)
	require.NoError(t, b.complete(t, second, 0, 100, 200))
	got := b.budget(t, bud.ID)
	require.Equal(t, int64(300), got.SpentTokens)
	require.Zero(t, got.ReservedTokens)
	require.Equal(t, int64(1), b.scalar(t, `SELECT count(*) FROM reservations`), "one reservation per (run, call)")
}

// TestSweeperReleasesDeadRunOnce: the reservation of a run whose worker died (lease expired) is
// released by the sweeper exactly once, even with two sweepers at the same time; a live run's is
// left alone.
func TestSweeperReleasesDeadRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(100_000))})
	dead, live := b.lease(t, b.member), b.lease(t, b.member)
	for _, l := range []run.Lease{dead, live} {
		_, err := b.svc.Reserve(context.Background(), l, 0, model, request(1000))
		require.NoError(t, err)
	}
	require.Equal(t, int64(2200), b.budget(t, bud.ID).ReservedTokens)
	// Nothing is dead yet.
	n, err := b.svc.ReleaseDead(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	// The dead run's worker stopped renewing its lease a while ago.
	b.owner(t, func(tx pgx.Tx) {
		_, err := tx.Exec(context.Background(), `UPDATE runs SET lease_expires_at = now() - interval '1 minute' WHERE id = $1`, dead.Run.ID)
		require.NoError(t, err)
		_, err = tx.Exec(context.Background(), `UPDATE reservations SET created_at = now() - interval '1 minute'`)
		require.NoError(t, err)
	})
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := b.svc.ReleaseDead(context.Background())
			require.NoError(t, err)
			total.Add(int64(n))
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), total.Load(), "released exactly once")
	require.Equal(t, int64(1100), b.budget(t, bud.ID).ReservedTokens, "the live run's reservation is kept")
	require.Equal(t, int64(1), b.scalar(t, `SELECT count(*) FROM reservations WHERE status = 'RELEASED' AND run_id = $1`, dead.Run.ID))
	// A late settle of the dead call (its worker was only slow) still counts its usage once and
	// gives nothing back twice.
	require.NoError(t, b.complete(t, dead, 0, 50, 50))
	got := b.budget(t, bud.ID)
	require.Equal(t, int64(100), got.SpentTokens)
	require.Equal(t, int64(1100), got.ReservedTokens)
	require.GreaterOrEqual(t, got.ReservedTokens, int64(0))
}

// TestWindowRollsOver: in a new window spent starts from zero; reservations in flight carry
// over.
func TestWindowRollsOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(2000))})
	l := b.lease(t, b.member)
	_, err := b.svc.Reserve(context.Background(), l, 0, model, request(1000))
	require.NoError(t, err)
	require.NoError(t, b.complete(t, l, 0, 100, 1700))
	_, err = b.svc.Reserve(context.Background(), l, 1, model, request(1000))
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err))
	// Two days pass.
	b.owner(t, func(tx pgx.Tx) {
		_, err := tx.Exec(context.Background(), `UPDATE budget_stripes SET period_start = period_start - interval '2 days'`)
		require.NoError(t, err)
	})
	got := b.budget(t, bud.ID)
	require.Zero(t, got.SpentTokens, "a new window")
	require.Equal(t, usage.PeriodDay, got.Period)
	require.Equal(t, time.Now().UTC().Truncate(24*time.Hour), got.PeriodStart)
	_, err = b.svc.Reserve(context.Background(), l, 1, model, request(1000))
	require.NoError(t, err)
	got = b.budget(t, bud.ID)
	require.Zero(t, got.SpentTokens)
	require.Equal(t, int64(1100), got.ReservedTokens)
}

// TestBudgetAccess: admins set and delete budgets; members read the tenant's and their own
// only; another tenant's budget is NOT_FOUND.
func TestBudgetAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ownerCtx, memberCtx := b.as(b.admin, auth.RoleOwner), b.as(b.member, auth.RoleMember)
	_, err := b.svc.SetBudget(memberCtx, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay})
	require.Equal(t, apperr.Forbidden, apperr.CodeOf(err))
	tenantBudget := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodMonth, CostLimitMicros: ptr(int64(5_000_000))})
	adminBudget := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeUser, UserID: b.admin, Period: usage.PeriodDay, TokenLimit: ptr(int64(10))})
	memberBudget := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeUser, UserID: b.member, Period: usage.PeriodDay, TokenLimit: ptr(int64(10))})
	// Setting again replaces the limits of the same budget.
	again := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeUser, UserID: b.member, Period: usage.PeriodDay, TokenLimit: ptr(int64(20))})
	require.Equal(t, memberBudget.ID, again.ID)
	require.Equal(t, int64(20), *again.TokenLimit)
	require.Nil(t, again.CostLimitMicros)

	all, err := b.svc.Budgets(ownerCtx)
	require.NoError(t, err)
	require.Len(t, all, 3)
	mine, err := b.svc.Budgets(memberCtx)
	require.NoError(t, err)
	ids := []uuid.UUID{}
	for _, x := range mine {
		ids = append(ids, x.ID)
	}
	require.ElementsMatch(t, []uuid.UUID{tenantBudget.ID, memberBudget.ID}, ids)
	_, err = b.svc.Budget(memberCtx, adminBudget.ID)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "another user's budget")

	// Bad input.
	for _, in := range []usage.SetBudget{
		{Scope: usage.ScopeUser, Period: usage.PeriodDay},
		{Scope: usage.ScopeTenant, UserID: b.member, Period: usage.PeriodDay},
		{Scope: usage.ScopeTenant, Period: "WEEK"},
		{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(-1))},
	} {
		_, err := b.svc.SetBudget(ownerCtx, in)
		require.Equal(t, apperr.BadUserInput, apperr.CodeOf(err), "%+v", in)
	}

	// Another tenant sees none of it.
	otherTenant, otherOwner, _ := b.newTenant(t)
	otherCtx := auth.WithActor(context.Background(), auth.Actor{UserID: otherOwner, TenantID: otherTenant, Role: auth.RoleOwner})
	_, err = b.svc.Budget(otherCtx, tenantBudget.ID)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	require.Equal(t, apperr.NotFound, apperr.CodeOf(b.svc.DeleteBudget(otherCtx, tenantBudget.ID)))
	_, err = b.svc.SetBudget(otherCtx, usage.SetBudget{Scope: usage.ScopeUser, UserID: b.member, Period: usage.PeriodDay})
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "a user of another tenant")
	others, err := b.svc.Budgets(otherCtx)
	require.NoError(t, err)
	require.Empty(t, others)

	require.Equal(t, apperr.Forbidden, apperr.CodeOf(b.svc.DeleteBudget(memberCtx, memberBudget.ID)))
	require.NoError(t, b.svc.DeleteBudget(ownerCtx, memberBudget.ID))
	require.Equal(t, apperr.NotFound, apperr.CodeOf(b.svc.DeleteBudget(ownerCtx, memberBudget.ID)))
}

// TestNewBudgetCountsTheWindowsUsage: a budget made mid-window starts with the usage the window
// already holds.
func TestNewBudgetCountsTheWindowsUsage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.lease(t, b.member)
	require.NoError(t, b.complete(t, l, 0, 300, 200))
	l2 := b.lease(t, b.admin)
	require.NoError(t, b.complete(t, l2, 0, 1000, 1000))
	tenantBudget := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodMonth})
	memberBudget := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeUser, UserID: b.member, Period: usage.PeriodDay})
	require.Equal(t, int64(2500), tenantBudget.SpentTokens)
	require.Equal(t, int64(500), memberBudget.SpentTokens)
	require.Equal(t, model.Cost(llm.Usage{InputTokens: 300, OutputTokens: 200}), memberBudget.SpentMicros)
}

// TestStripesShareTheLimit: a budget's stripes are allowed shares of its limit that add up to
// it. A call too big for its run's stripe is reserved on the budget's totals (the shares dealt
// out again), a call too big for the totals is refused, and a new limit is dealt out anew.
func TestStripesShareTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(10_000))})
	allowed := func() int64 {
		return b.scalar(t, `SELECT sum(allowed_tokens)::bigint FROM budget_stripes WHERE budget_id = $1`, bud.ID)
	}
	over := func() int64 {
		return b.scalar(t, `SELECT count(*) FROM budget_stripes WHERE budget_id = $1 AND spent_tokens + reserved_tokens > allowed_tokens`, bud.ID)
	}
	require.Equal(t, int64(16), b.scalar(t, `SELECT count(*) FROM budget_stripes WHERE budget_id = $1`, bud.ID))
	require.Equal(t, int64(10_000), allowed())
	require.Equal(t, int64(625), b.scalar(t, `SELECT max(allowed_tokens) FROM budget_stripes WHERE budget_id = $1`, bud.ID))

	// 3,100 tokens each: more than a stripe's 625, within the budget's 10,000.
	l1, l2, l3 := b.lease(t, b.member), b.lease(t, b.member), b.lease(t, b.member)
	for _, l := range []run.Lease{l1, l2} {
		held, err := b.svc.Reserve(ctx, l, 0, model, request(3000))
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, int64(10_000), allowed())
		require.Zero(t, over())
	}
	require.Equal(t, int64(6200), b.budget(t, bud.ID).ReservedTokens)
	// 4,100 more would make 10,300; 3,700 makes 9,900.
	_, err := b.svc.Reserve(ctx, l3, 0, model, request(4000))
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err))
	held, err := b.svc.Reserve(ctx, l3, 0, model, request(3600))
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, int64(10_000), allowed())
	require.Zero(t, over())

	// Settling gives the reservation back on its stripe and counts the actual usage there.
	require.NoError(t, b.complete(t, l1, 0, 500, 500))
	got := b.budget(t, bud.ID)
	require.Equal(t, int64(1000), got.SpentTokens)
	require.Equal(t, int64(6800), got.ReservedTokens)

	// A limit lowered below what is used is dealt out too; nothing more fits.
	b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(5000))})
	require.Equal(t, int64(5000), allowed())
	got = b.budget(t, bud.ID)
	require.Equal(t, int64(1000), got.SpentTokens, "counters stay")
	require.Equal(t, int64(6800), got.ReservedTokens)
	_, err = b.svc.Reserve(ctx, l1, 1, model, request(0))
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err))
	require.Equal(t, int64(6800), b.budget(t, bud.ID).ReservedTokens)
}

// TestCrossingOverStripesIsMarkedOnce: spend on two stripes that crosses 80% only together is
// found by the settlement that completes it, and marked once in the window.
func TestCrossingOverStripesIsMarkedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(10_000))})
	stripe := func(l run.Lease) int64 { return b.scalar(t, `SELECT agentry_budget_stripe($1)`, l.Run.ID) }
	l1 := b.lease(t, b.member)
	l2 := b.lease(t, b.member)
	for stripe(l2) == stripe(l1) {
		l2 = b.lease(t, b.member)
	}
	warned := func() int64 {
		return b.scalar(t, `SELECT count(*) FROM budgets WHERE id = $1 AND warned_start IS NOT NULL`, bud.ID)
	}
	require.NoError(t, b.complete(t, l1, 0, 2000, 2500))
	require.Zero(t, warned(), "45%")
	require.NoError(t, b.complete(t, l2, 0, 2000, 2000))
	require.Equal(t, int64(1), warned(), "85% over two stripes")
	require.Zero(t, b.scalar(t, `SELECT count(*) FROM budgets WHERE id = $1 AND exceeded_start IS NOT NULL`, bud.ID))
	require.Equal(t, int64(8500), b.budget(t, bud.ID).SpentTokens)
}

// TestOverageOnOneStripeStopsTheOthers: an overage that leaves its stripe above its allowance
// deals the budget out again, so a run on another stripe is refused too, not reserved by its
// own stripe's allowance.
func TestOverageOnOneStripeStopsTheOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(10_000))})
	stripe := func(l run.Lease) int64 { return b.scalar(t, `SELECT agentry_budget_stripe($1)`, l.Run.ID) }
	l1, l2 := b.lease(t, b.member), b.lease(t, b.member)
	for stripe(l2) == stripe(l1) {
		l2 = b.lease(t, b.member)
	}
	held, err := b.svc.Reserve(ctx, l1, 0, model, request(400)) // 500 of its stripe's 625
	require.NoError(t, err)
	require.True(t, held)
	require.NoError(t, b.complete(t, l1, 0, 2000, 10_000)) // 12,000: over the whole limit
	require.Equal(t, int64(10_000), b.scalar(t, `SELECT sum(allowed_tokens)::bigint FROM budget_stripes WHERE budget_id = $1`, bud.ID))
	require.Zero(t, b.scalar(t, `SELECT count(*) FROM budget_stripes WHERE budget_id = $1 AND spent_tokens + reserved_tokens < allowed_tokens`, bud.ID),
		"no stripe has room left")
	_, err = b.svc.Reserve(ctx, l2, 0, model, request(10))
	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(err))
	require.Equal(t, int64(12_000), b.budget(t, bud.ID).SpentTokens)
	require.Zero(t, b.budget(t, bud.ID).ReservedTokens)
}

// TestSlowPathWaitingForANewLimitUsesIt: a reservation on the budget's totals that waits for a
// concurrent setBudget's stripes decides on the limit that setBudget set, not on the one its
// statement started with.
func TestSlowPathWaitingForANewLimitUsesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bud := b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(10_000))})
	l := b.lease(t, b.member)
	for b.scalar(t, `SELECT agentry_budget_stripe($1)`, l.Run.ID) == 0 {
		l = b.lease(t, b.member)
	}
	// "setBudget" holds stripe 0, the first the slow path locks; the run's own stripe is free.
	tx, release := b.ownerTx(t)
	defer release()
	_, err := tx.Exec(ctx, `SELECT 1 FROM budget_stripes WHERE budget_id = $1 AND stripe = 0 FOR UPDATE`, bud.ID)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := b.svc.Reserve(ctx, l, 0, model, request(3000)) // 3,100: more than its stripe's 625
		done <- err
	}()
	require.Eventually(t, func() bool {
		return b.scalar(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%BudgetReserveAll%'`) > 0
	}, 10*time.Second, 10*time.Millisecond, "the slow path waits for stripe 0")
	// The limit goes down to 2,000 and is dealt out, as setBudget does.
	q := dbsqlc.New(tx)
	_, err = q.BudgetUpsert(ctx, dbsqlc.BudgetUpsertParams{TenantID: b.tenant, ID: uuid.Must(uuid.NewV7()), Scope: usage.ScopeTenant, Period: usage.PeriodDay, TokenLimit: ptr(int64(2000))})
	require.NoError(t, err)
	require.NoError(t, q.BudgetStripesSet(ctx, dbsqlc.BudgetStripesSetParams{TenantID: b.tenant, ID: bud.ID}))
	require.NoError(t, tx.Commit(ctx))

	require.Equal(t, apperr.BudgetExceeded, apperr.CodeOf(<-done), "3,100 does not fit 2,000")
	require.Equal(t, int64(2000), b.scalar(t, `SELECT sum(allowed_tokens)::bigint FROM budget_stripes WHERE budget_id = $1`, bud.ID))
	require.Zero(t, b.budget(t, bud.ID).ReservedTokens)
}

// TestSettleReadsOnlyItsReservation: settling a call reads its own reservation however many
// the tenant has (a plan that read all of them made every settlement slower as the tenant's
// history grew). The transaction's own table counters tell what its statements read.
func TestSettleReadsOnlyItsReservation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setBudget(t, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodMonth, TokenLimit: ptr(int64(1e12))})
	ctx := context.Background()
	l := b.lease(t, b.member)
	const history = 120
	for i := range history + 1 {
		held, err := b.svc.Reserve(ctx, l, i, model, request(100))
		require.NoError(t, err)
		require.True(t, held)
		if i < history {
			require.NoError(t, b.complete(t, l, i, 80, 20))
		}
	}
	u := llm.Usage{InputTokens: 80, OutputTokens: 20}
	var read int64
	require.NoError(t, b.runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
		count := func() (n int64, err error) {
			err = tx.QueryRow(ctx, `SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::bigint
				FROM pg_stat_xact_user_tables WHERE relname = 'reservations'`).Scan(&n)
			return n, err
		}
		before, err := count()
		if err != nil {
			return err
		}
		if err := b.svc.Settle(ctx, tx, l, history, u, model.Cost(u)); err != nil {
			return err
		}
		after, err := count()
		read = after - before
		return err
	}))
	require.LessOrEqual(t, read, int64(4), "reservation rows read by one settlement, with %d in the tenant's history", history)
}
