// Package ratelimit is agentry's request rate limiting: GCRA buckets in Redis
// (go-redis/redis_rate) for the mutations that spend (per tenant, by plan, and per API key) and
// for logIn / signUp (per client IP). The GraphQL root-field middleware applies it before a
// limited mutation's resolver runs.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/metrics"
)

// KeyLimit is the limit of one API key under a tenant limit: half its rate and burst.
func KeyLimit(tenant config.RateLimit) config.RateLimit {
	if tenant.Off {
		return tenant
	}
	return config.RateLimit{Rate: max(tenant.Rate/2, 1), Burst: max(tenant.Burst/2, 1), Period: tenant.Period}
}

// DefaultAuthLimit limits logIn and signUp per client IP.
var DefaultAuthLimit = config.RateLimit{Rate: 20, Burst: 20, Period: time.Minute}

// DefaultAccountLimit limits logIn and requestPasswordReset per account (the email they name),
// whatever the client: guessing one account's password from many addresses is as slow as from
// one.
var DefaultAccountLimit = config.RateLimit{Rate: 10, Burst: 10, Period: time.Minute}

// DefaultCreateLimit limits the mutations that create something (conversations, API keys,
// members, tasks, snapshots) per user, and per API key for a caller using one.
var DefaultCreateLimit = config.RateLimit{Rate: 2, Burst: 20, Period: time.Second}

// limiterTimeout bounds one Redis round trip of the limiter: an unreachable Redis must fail a
// request fast, not hang it.
const limiterTimeout = 500 * time.Millisecond

// planTTL is how long the limiter trusts a tenant's plan it has read (its name and spend limit):
// a change by another process (setPlan, setTenantPlan) applies within it.
const planTTL = time.Minute

// Options configure a Limiter.
type Options struct {
	// Redis holds the GCRA state; Prefix namespaces its keys.
	Redis  redis.UniversalClient
	Prefix string
	// DB reads tenants' plans (the plans table: their spend limits).
	DB *db.DB
	// Spend overrides the plans' spend limits (config.Config.RateLimitSpend: plan -> limit, ""
	// for every plan not named); nil keeps them.
	Spend map[string]config.RateLimit
	// Auth overrides DefaultAuthLimit; nil keeps it.
	Auth *config.RateLimit
	// Create overrides DefaultCreateLimit; nil keeps it.
	Create *config.RateLimit
	// Account overrides DefaultAccountLimit; nil keeps it.
	Account *config.RateLimit
	Log     *slog.Logger
	// Metrics counts the requests the limiter refuses (nil: not counted).
	Metrics *metrics.Metrics
}

// Limiter applies GCRA rate limits (go-redis/redis_rate) to the mutations that spend, per
// tenant and per API key, and to logIn / signUp per client IP. Refusals are RATE_LIMITED with
// retryAfter (seconds) in the error. When Redis cannot be reached spending mutations fail closed
// (RATE_LIMITED, "rate limiting is unavailable"), while logIn and signUp go on (logged): locking
// every user out would be worse than losing brute-force throttling for a while.
type Limiter struct {
	rdb    atomic.Pointer[redis_rate.Limiter]
	prefix string
	db     *db.DB
	spend  map[string]config.RateLimit
	auth   config.RateLimit
	create config.RateLimit
	acct   config.RateLimit
	log    *slog.Logger
	// metrics counts refusals (nil: not counted).
	metrics *metrics.Metrics

	mu    sync.Mutex
	plans map[uuid.UUID]planEntry
}

// planEntry is a tenant's plan as read: its name and its spend limit.
type planEntry struct {
	plan    string
	spend   config.RateLimit
	expires time.Time
}

// New returns a limiter.
func New(o Options) *Limiter {
	l := &Limiter{prefix: o.Prefix + "agentry:rl:", db: o.DB, spend: o.Spend, auth: DefaultAuthLimit, create: DefaultCreateLimit, acct: DefaultAccountLimit, log: o.Log, metrics: o.Metrics,
		plans: map[uuid.UUID]planEntry{}}
	if o.Account != nil {
		l.acct = *o.Account
	}
	if o.Auth != nil {
		l.auth = *o.Auth
	}
	if o.Create != nil {
		l.create = *o.Create
	}
	l.UseRedis(o.Redis)
	return l
}

// UseRedis switches the Redis the limiter keeps its state in.
func (l *Limiter) UseRedis(rdb redis.UniversalClient) {
	l.rdb.Store(redis_rate.NewLimiter(rdb))
}

// SpendLimit is the spending limit of tenant tenantID: its plan's (the plans table), or the
// configured override of that plan.
func (l *Limiter) SpendLimit(ctx context.Context, tenantID uuid.UUID) (config.RateLimit, error) {
	p, err := l.plan(ctx, tenantID)
	if err != nil {
		return config.RateLimit{}, err
	}
	if o, ok := l.spend[p.plan]; ok {
		return o, nil
	}
	if o, ok := l.spend[""]; ok {
		return o, nil
	}
	return p.spend, nil
}

// ForgetPlans drops the plans the limiter has read, so that a change made in this process
// (setPlan, setTenantPlan) applies at once; other processes apply it within planTTL.
func (l *Limiter) ForgetPlans() {
	l.mu.Lock()
	l.plans = map[uuid.UUID]planEntry{}
	l.mu.Unlock()
}

// Spend admits one spending mutation of the actor: for an API key, the key's own bucket
// (KeyLimit), then its tenant's bucket must have room.
func (l *Limiter) Spend(ctx context.Context, a auth.Actor) error {
	limit, err := l.SpendLimit(ctx, a.TenantID)
	if err != nil {
		return err
	}
	if limit.Off {
		return nil
	}
	if a.APIKeyID != uuid.Nil {
		if err := l.allow(ctx, "spend", "key:"+a.APIKeyID.String(), KeyLimit(limit)); err != nil {
			return l.closed(ctx, err)
		}
	}
	if err := l.allow(ctx, "spend", "tenant:"+a.TenantID.String(), limit); err != nil {
		return l.closed(ctx, err)
	}
	return nil
}

// Auth admits one logIn or signUp from a client IP. An unreachable Redis admits it (logged).
func (l *Limiter) Auth(ctx context.Context, ip string) error {
	if l.auth.Off || ip == "" {
		return nil
	}
	err := l.allow(ctx, "auth", "ip:"+ip, l.auth)
	if err != nil && apperr.CodeOf(err) != apperr.RateLimited {
		l.log.WarnContext(ctx, "rate limiter unavailable: logIn/signUp not limited", slog.Any("error", err))
		return nil
	}
	return err
}

// Account admits one logIn or requestPasswordReset naming email (case-insensitive; the key is
// a hash of the address, not the address). An unreachable Redis admits it (logged), as Auth
// does.
func (l *Limiter) Account(ctx context.Context, email string) error {
	if l.acct.Off || email == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	err := l.allow(ctx, "account", "acct:"+hex.EncodeToString(sum[:16]), l.acct)
	if err != nil && apperr.CodeOf(err) != apperr.RateLimited {
		l.log.WarnContext(ctx, "rate limiter unavailable: logIn not limited per account", slog.Any("error", err))
		return nil
	}
	return err
}

// Create admits one mutation of the actor that creates something: the API key's bucket for a
// caller using one, the user's otherwise. An unreachable Redis refuses it, as Spend does.
func (l *Limiter) Create(ctx context.Context, a auth.Actor) error {
	if l.create.Off {
		return nil
	}
	key := "create:user:" + a.UserID.String()
	if a.APIKeyID != uuid.Nil {
		key = "create:key:" + a.APIKeyID.String()
	}
	if err := l.allow(ctx, "create", key, l.create); err != nil {
		return l.closed(ctx, err)
	}
	return nil
}

// errUnavailable marks a limiter that could not reach Redis.
var errUnavailable = errors.New("rate limiter unavailable")

// closed turns a Redis failure into the fail-closed answer of spending and creating mutations.
func (l *Limiter) closed(ctx context.Context, err error) error {
	if apperr.CodeOf(err) == apperr.RateLimited {
		return err
	}
	l.metrics.RateLimited("unavailable")
	l.log.WarnContext(ctx, "rate limiter unavailable: refusing a limited mutation", slog.Any("error", err))
	return apperr.New(apperr.RateLimited, "rate limiting is unavailable (its store cannot be reached), so operations that spend or create are refused; try again shortly").
		With("retryAfter", 1)
}

// allow takes one request from key's bucket under limit (named name in the metrics).
func (l *Limiter) allow(ctx context.Context, name, key string, limit config.RateLimit) error {
	ctx, cancel := context.WithTimeout(ctx, limiterTimeout)
	defer cancel()
	res, err := l.rdb.Load().Allow(ctx, l.prefix+key, redis_rate.Limit{Rate: limit.Rate, Burst: limit.Burst, Period: limit.Period})
	if err != nil {
		return fmt.Errorf("%w: %w", errUnavailable, err)
	}
	if res.Allowed > 0 {
		return nil
	}
	l.metrics.RateLimited(name)
	secs := int(math.Ceil(res.RetryAfter.Seconds()))
	secs = max(secs, 1)
	return apperr.New(apperr.RateLimited, "too many requests (limit %s): retry in %d s", limit, secs).With("retryAfter", secs)
}

// cachedPlan returns the tenant's plan when the cache has it fresh.
func (l *Limiter) cachedPlan(tenantID uuid.UUID) (planEntry, bool) {
	l.mu.Lock()
	e, ok := l.plans[tenantID]
	l.mu.Unlock()
	if ok && time.Now().Before(e.expires) {
		return e, true
	}
	return planEntry{}, false
}

// plan returns the tenant's plan, cached for planTTL.
func (l *Limiter) plan(ctx context.Context, tenantID uuid.UUID) (planEntry, error) {
	if e, ok := l.cachedPlan(tenantID); ok {
		return e, nil
	}
	var p dbsqlc.Plan
	err := l.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		p, err = tx.Q.PlanGetByTenant(ctx, tenantID)
		return err
	})
	if err != nil {
		return planEntry{}, fmt.Errorf("read the plan of tenant %s: %w", tenantID, err)
	}
	e := planEntry{plan: p.Name, spend: config.RateLimit{Rate: int(p.SpendRate), Burst: int(p.SpendBurst), Period: time.Second},
		expires: time.Now().Add(planTTL)}
	l.mu.Lock()
	if len(l.plans) > 10_000 {
		l.plans = map[uuid.UUID]planEntry{}
	}
	l.plans[tenantID] = e
	l.mu.Unlock()
	return e, nil
}
