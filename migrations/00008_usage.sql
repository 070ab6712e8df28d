-- +goose Up

-- The start of the budget window (UTC day or month) that `at` falls in.
CREATE FUNCTION agentry_period_start(period text, at timestamptz) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_trunc(CASE period WHEN 'DAY' THEN 'day' ELSE 'month' END, at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;

-- Budgets: spending limits per tenant (scope TENANT) or per user of a tenant (scope USER), per
-- UTC day or month, in tokens (input + output) and in cost (micro-dollars); a NULL limit is no
-- limit on that measure. The counters describe the window starting at period_start; the first
-- write in a later window resets spent (reserved carries over: reservations in flight still
-- hold). Reserve-then-settle keeps spent + reserved <= limit at every moment (see
-- internal/usage/ARCHITECTURE.md); only a call whose actual usage exceeds its reservation can
-- push spent past the limit, by at most that call's overage.
CREATE TABLE budgets (
    tenant_id         uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                uuid NOT NULL,
    scope             text NOT NULL CHECK (scope IN ('TENANT', 'USER')),
    user_id           uuid REFERENCES users (id) ON DELETE CASCADE,
    period            text NOT NULL CHECK (period IN ('DAY', 'MONTH')),
    token_limit       bigint CHECK (token_limit >= 0),
    cost_limit_micros bigint CHECK (cost_limit_micros >= 0),
    period_start      timestamptz NOT NULL,
    spent_tokens      bigint NOT NULL DEFAULT 0 CHECK (spent_tokens >= 0),
    spent_micros      bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    reserved_tokens   bigint NOT NULL DEFAULT 0 CHECK (reserved_tokens >= 0),
    reserved_micros   bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    -- The period_start of the window in which budget.warning (80%) / budget.exceeded (100% or
    -- a refused reservation) was sent: one event of each kind per window.
    warned_start      timestamptz,
    exceeded_start    timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT budgets_scope_user CHECK ((scope = 'USER') = (user_id IS NOT NULL))
);
-- One budget per (scope, user, period): setBudget replaces it.
CREATE UNIQUE INDEX budgets_key ON budgets (tenant_id, scope, user_id, period) NULLS NOT DISTINCT;

-- Reservations: the worst case of one LLM call (run, call index), held on every budget that
-- applied when it was made (budget_ids) until the call settles (its actual usage moves into
-- spent, in the transaction that stores the reply and usage record) or is released (the call
-- failed, or the sweeper found its run dead). A reservation changes status exactly once.
-- There is no foreign key to runs: a reservation must outlive its run's deletion until the
-- sweeper gives its amounts back.
CREATE TABLE reservations (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id              uuid NOT NULL,
    run_id          uuid NOT NULL,
    call_index      integer NOT NULL,
    -- The run attempt that made it: a later attempt releases it before reserving again.
    attempt         integer NOT NULL,
    budget_ids      uuid[] NOT NULL,
    reserved_tokens bigint NOT NULL CHECK (reserved_tokens >= 0),
    reserved_micros bigint NOT NULL CHECK (reserved_micros >= 0),
    -- The call's actual usage, once settled (it may exceed the reservation: the overage).
    actual_tokens   bigint,
    actual_micros   bigint,
    status          text NOT NULL DEFAULT 'HELD' CHECK (status IN ('HELD', 'SETTLED', 'RELEASED')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- A held reservation past this time is released whatever its run says (a backstop).
    expires_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX reservations_call_key ON reservations (tenant_id, run_id, call_index);
-- The sweeper reads only held reservations.
CREATE INDEX reservations_held_idx ON reservations (expires_at) WHERE status = 'HELD';

ALTER TABLE budgets ENABLE ROW LEVEL SECURITY;
ALTER TABLE budgets FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON budgets USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE reservations ENABLE ROW LEVEL SECURITY;
ALTER TABLE reservations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON reservations USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- Dashboards aggregate usage over a time range by day, user, model, run kind and tenant. Closed
-- UTC days are rolled up into usage_daily by a periodic job (usage.RollupArgs), which advances
-- usage_rollup_state.rolled_through one day at a time once the day has been over for an hour
-- (a usage record is written with its call's other effects in a short transaction, so none
-- commits that late). A summary reads usage_daily for the whole days of its range before
-- rolled_through and usage_records for the rest (the edges and the recent tail), so it stays
-- fast with millions of records.
CREATE TABLE usage_daily (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day           timestamptz NOT NULL,
    user_id       uuid NOT NULL,
    run_kind      text NOT NULL,
    provider      text NOT NULL,
    model         text NOT NULL,
    calls         bigint NOT NULL,
    input_tokens  bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cached_tokens bigint NOT NULL,
    cost_micros   bigint NOT NULL,
    PRIMARY KEY (tenant_id, day, user_id, run_kind, provider, model)
);
CREATE INDEX usage_daily_day_idx ON usage_daily (day);

ALTER TABLE usage_daily ENABLE ROW LEVEL SECURITY;
ALTER TABLE usage_daily FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON usage_daily USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- How far usage_daily reaches (exclusive, a UTC midnight): every usage record before it is
-- counted in usage_daily. One row, shared by every tenant; the epoch means nothing yet.
CREATE TABLE usage_rollup_state (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    rolled_through timestamptz NOT NULL
);
INSERT INTO usage_rollup_state (rolled_through) VALUES ('1970-01-01T00:00:00Z');

-- The raw parts of summaries read usage_records by (tenant_id, created_at) (since 00003); the
-- rollup job and platform admins read every tenant's by time.
CREATE INDEX usage_records_created_idx ON usage_records (created_at);

-- +goose Down
DROP INDEX usage_records_created_idx;
DROP TABLE usage_rollup_state;
DROP TABLE usage_daily;
DROP TABLE reservations;
DROP TABLE budgets;
DROP FUNCTION agentry_period_start(text, timestamptz);
