package ratelimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/ratelimit"
)

// bundle is a test database with one tenant (an OWNER and a MEMBER) and a Redis client.
type bundle struct {
	db       *db.DB
	ownerURL string
	rdb      *redis.Client
	tenant   uuid.UUID
	admin    uuid.UUID
	member   uuid.UUID
}

func setup(t testing.TB) *bundle {
	t.Helper()
	d, ownerURL := dbtest.Open(t)
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	b := &bundle{db: d, ownerURL: ownerURL, rdb: rdb}
	b.tenant, b.admin, b.member = b.newTenant(t)
	return b
}

// newTenant makes a tenant (plan free) with an OWNER (returned as admin) and a MEMBER.
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

// owner runs fn in a committed system-scoped transaction as the database's owner.
func (b *bundle) owner(t testing.TB, fn func(tx pgx.Tx)) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	fn(tx)
	require.NoError(t, tx.Commit(ctx))
}

func (b *bundle) limiter(t testing.TB, spend map[string]config.RateLimit, authLimit *config.RateLimit) *ratelimit.Limiter {
	t.Helper()
	return ratelimit.New(ratelimit.Options{
		Redis: b.rdb, Prefix: fmt.Sprintf("rltest%d:", time.Now().UnixNano()), DB: b.db,
		Spend: spend, Auth: authLimit, Log: slog.New(slog.DiscardHandler),
	})
}

// TestGCRA: 100 requests/s with bursts of 20, hammered for 3 s, allows between 300 and 321
// (20 at once, then one every 10 ms); every refusal is RATE_LIMITED with retryAfter.
func TestGCRA(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.limiter(t, map[string]config.RateLimit{"": {Rate: 100, Burst: 20, Period: time.Second}}, nil)
	a := auth.Actor{UserID: b.member, TenantID: b.tenant, Role: auth.RoleMember}
	allowed, refused := 0, 0
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		err := l.Spend(context.Background(), a)
		switch {
		case err == nil:
			allowed++
		default:
			e, ok := apperr.As(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, apperr.RateLimited, e.Code)
			require.GreaterOrEqual(t, e.Fields["retryAfter"], 1, "retryAfter in seconds")
			refused++
		}
		time.Sleep(time.Millisecond) // a client's pace, well above the limit
	}
	t.Logf("allowed %d, refused %d in 3 s", allowed, refused)
	require.GreaterOrEqual(t, allowed, 300)
	require.LessOrEqual(t, allowed, 321)
	require.Positive(t, refused)
}

// TestSpendLimitsPerTenantAndKey: a tenant's bucket is shared by its users and keys; an API key
// also has its own; tenants do not share; plans and overrides pick the limit.
func TestSpendLimitsPerTenantAndKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.limiter(t, map[string]config.RateLimit{"free": {Rate: 1, Burst: 3, Period: time.Hour}, "pro": {Off: true}}, nil)
	member := auth.Actor{UserID: b.member, TenantID: b.tenant, Role: auth.RoleMember}
	admin := auth.Actor{UserID: b.admin, TenantID: b.tenant, Role: auth.RoleOwner}
	ctx := context.Background()
	require.NoError(t, l.Spend(ctx, member))
	require.NoError(t, l.Spend(ctx, admin))
	require.NoError(t, l.Spend(ctx, member))
	require.Equal(t, apperr.RateLimited, apperr.CodeOf(l.Spend(ctx, admin)), "the tenant's burst of 3 is shared")
	other, otherOwner, _ := b.newTenant(t)
	require.NoError(t, l.Spend(ctx, auth.Actor{UserID: otherOwner, TenantID: other, Role: auth.RoleOwner}), "another tenant has its own")

	// A pro tenant (limits off by the override) is not limited.
	pro, proOwner, _ := b.newTenant(t)
	b.owner(t, func(tx pgx.Tx) {
		_, err := tx.Exec(ctx, `UPDATE tenants SET plan = 'pro' WHERE id = $1`, pro)
		require.NoError(t, err)
	})
	for range 10 {
		require.NoError(t, l.Spend(ctx, auth.Actor{UserID: proOwner, TenantID: pro, Role: auth.RoleOwner}))
	}

	// The limit is the plan's row (the plans table), unless overridden.
	ent, entOwner, _ := b.newTenant(t)
	b.owner(t, func(tx pgx.Tx) {
		_, err := tx.Exec(ctx, `UPDATE tenants SET plan = 'enterprise' WHERE id = $1`, ent)
		require.NoError(t, err)
	})
	spendLimit := func(l *ratelimit.Limiter, tenant uuid.UUID) config.RateLimit {
		t.Helper()
		got, err := l.SpendLimit(ctx, tenant)
		require.NoError(t, err)
		return got
	}
	require.Equal(t, config.RateLimit{Rate: 1, Burst: 3, Period: time.Hour}, spendLimit(l, b.tenant))
	require.Equal(t, config.RateLimit{Rate: 200, Burst: 400, Period: time.Second}, spendLimit(l, ent), "not overridden")
	require.Equal(t, config.RateLimit{Rate: 10, Burst: 20, Period: time.Second}, spendLimit(b.limiter(t, nil, nil), b.tenant), "free's row")
	all := b.limiter(t, map[string]config.RateLimit{"": {Rate: 5, Burst: 5, Period: time.Second}}, nil)
	require.Equal(t, 5, spendLimit(all, ent).Rate)
	require.NoError(t, l.Spend(ctx, auth.Actor{UserID: entOwner, TenantID: ent, Role: auth.RoleOwner}))

	// A plan's row changed by another process applies once the limiter forgets what it read.
	plain := b.limiter(t, nil, nil)
	require.Equal(t, 200, spendLimit(plain, ent).Rate)
	b.owner(t, func(tx pgx.Tx) {
		_, err := tx.Exec(ctx, `INSERT INTO plans (name, spend_rate, spend_burst) VALUES ('rl-test', 7, 9) ON CONFLICT (name) DO NOTHING`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `UPDATE tenants SET plan = 'rl-test' WHERE id = $1`, ent)
		require.NoError(t, err)
	})
	require.Equal(t, 200, spendLimit(plain, ent).Rate, "cached")
	plain.ForgetPlans()
	require.Equal(t, config.RateLimit{Rate: 7, Burst: 9, Period: time.Second}, spendLimit(plain, ent))

	// An API key has its own bucket of half the tenant's: it cannot take the tenant's whole
	// allowance, and what it was refused is not taken from the tenant.
	keyed := b.limiter(t, map[string]config.RateLimit{"": {Rate: 1, Burst: 4, Period: time.Hour}}, nil)
	t2, o2, _ := b.newTenant(t)
	key := auth.Actor{UserID: o2, TenantID: t2, Role: auth.RoleOwner, APIKeyID: uuid.New()}
	session := auth.Actor{UserID: o2, TenantID: t2, Role: auth.RoleOwner}
	require.NoError(t, keyed.Spend(ctx, key))
	require.NoError(t, keyed.Spend(ctx, key))
	require.Equal(t, apperr.RateLimited, apperr.CodeOf(keyed.Spend(ctx, key)), "the key's burst of 2")
	require.NoError(t, keyed.Spend(ctx, session))
	require.NoError(t, keyed.Spend(ctx, session))
	require.Equal(t, apperr.RateLimited, apperr.CodeOf(keyed.Spend(ctx, session)), "the tenant's burst of 4")
	require.Equal(t, config.RateLimit{Rate: 5, Burst: 10, Period: time.Second}, ratelimit.KeyLimit(config.RateLimit{Rate: 10, Burst: 20, Period: time.Second}))
}

// TestAuthLimitPerIP: logIn/signUp are limited per client IP.
func TestAuthLimitPerIP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.limiter(t, nil, &config.RateLimit{Rate: 2, Burst: 2, Period: time.Minute})
	ctx := context.Background()
	require.NoError(t, l.Auth(ctx, "192.0.2.1"))
	require.NoError(t, l.Auth(ctx, "192.0.2.1"))
	err := l.Auth(ctx, "192.0.2.1")
	require.Equal(t, apperr.RateLimited, apperr.CodeOf(err))
	e, _ := apperr.As(err)
	require.GreaterOrEqual(t, e.Fields["retryAfter"], 29, "about 30 s until the next one")
	require.NoError(t, l.Auth(ctx, "192.0.2.2"), "another IP")
}

// TestRedisUnreachable: with its Redis unreachable the limiter refuses spending at once
// (fail closed, RATE_LIMITED, a clear message) and lets logIn/signUp through.
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.limiter(t, nil, nil)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	l.UseRedis(dead)
	start := time.Now()
	err := l.Spend(context.Background(), auth.Actor{UserID: b.member, TenantID: b.tenant, Role: auth.RoleMember})
	require.Less(t, time.Since(start), 2*time.Second, "fails fast")
	e, ok := apperr.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, apperr.RateLimited, e.Code)
	require.Contains(t, e.Message, "unavailable")
	require.Equal(t, 1, e.Fields["retryAfter"])
	require.NoError(t, l.Auth(context.Background(), "192.0.2.9"))
}

// TestParseRateLimits: the configuration syntax.
func TestParseRateLimits(t *testing.T) {
	t.Parallel()
	got, err := config.ParseRateLimits("10/s burst 20; pro = 100/m; enterprise=off")
	require.NoError(t, err)
	require.Equal(t, map[string]config.RateLimit{
		"":           {Rate: 10, Burst: 20, Period: time.Second},
		"pro":        {Rate: 100, Burst: 100, Period: time.Minute},
		"enterprise": {Off: true},
	}, got)
	require.Equal(t, "10/s burst 20", got[""].String())
	for _, bad := range []string{"10", "10/d", "0/s", "ten/s", "10/s burst", "pro=fast"} {
		_, err := config.ParseRateLimits(bad)
		require.Error(t, err, bad)
	}
	_, err = config.Load(func(k string) string {
		return map[string]string{"AGENTRY_RATE_LIMIT_SPEND": "lots", "AGENTRY_RATE_LIMIT_AUTH": "5/x"}[k]
	})
	require.ErrorContains(t, err, "AGENTRY_RATE_LIMIT_SPEND")
	require.ErrorContains(t, err, "AGENTRY_RATE_LIMIT_AUTH")
}
