-- +goose Up

-- Budget stripes: a budget's counters are split over a fixed number of stripes, each with its
-- own share of the budget's limits (its allowance), so concurrent calls of one tenant lock
-- different rows instead of queueing on the budget's. A call reserves on and settles to the
-- stripe of its run (agentry_budget_stripe), checking only that stripe:
-- spent + reserved + worst <= allowed. The allowances of a budget always add up to its limit,
-- so the stripes keeping to theirs keep the budget to its limit (the demarcation protocol).
-- A stripe short of room for a call takes the slow path: every stripe of the budget is locked,
-- the verdict is taken on the budget's totals, and the free remainder is dealt out again
-- (see internal/usage/ARCHITECTURE.md). The budget row keeps the limits and the
-- warning / exceeded marks; it is written only when they change.

-- How many stripes a budget has.
CREATE FUNCTION agentry_budget_stripes() RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 16::smallint $$;

-- The stripe a run's calls reserve on and settle to: from the last (random) byte of its id.
CREATE FUNCTION agentry_budget_stripe(run_id uuid) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT (get_byte(uuid_send(run_id), 15) % agentry_budget_stripes())::smallint $$;

-- Stripe i's share of free, dealt out over n stripes: the shares add up to free exactly (free
-- may be negative: a limit lowered below what is used already).
-- With r = free mod n (0 <= r < n), each stripe gets (free - r) / n and the first r one more.
CREATE FUNCTION agentry_budget_share(free bigint, n bigint, i integer) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (free - ((free % n) + n) % n) / n + CASE WHEN i < ((free % n) + n) % n THEN 1 ELSE 0 END
$$;

CREATE TABLE budget_stripes (
    tenant_id       uuid NOT NULL,
    budget_id       uuid NOT NULL,
    stripe          smallint NOT NULL CHECK (stripe >= 0),
    -- The counters of the window starting at period_start (as the budget's were before).
    period_start    timestamptz NOT NULL,
    spent_tokens    bigint NOT NULL DEFAULT 0 CHECK (spent_tokens >= 0),
    spent_micros    bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    reserved_tokens bigint NOT NULL DEFAULT 0 CHECK (reserved_tokens >= 0),
    reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    -- The stripe's share of token_limit / cost_limit_micros (NULL: the budget has no such limit).
    allowed_tokens  bigint,
    allowed_micros  bigint,
    PRIMARY KEY (tenant_id, budget_id, stripe),
    FOREIGN KEY (tenant_id, budget_id) REFERENCES budgets (tenant_id, id) ON DELETE CASCADE
);
ALTER TABLE budget_stripes ENABLE ROW LEVEL SECURITY;
ALTER TABLE budget_stripes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON budget_stripes USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- Deleting a budget (by itself, or with its user or tenant) locks its stripes in stripe order
-- first, as every statement locking several of them does: the cascade alone would take them in
-- whatever order its scan finds them.
-- +goose StatementBegin
CREATE FUNCTION agentry_budget_lock_stripes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM budget_stripes WHERE tenant_id = OLD.tenant_id AND budget_id = OLD.id ORDER BY stripe FOR UPDATE;
    RETURN OLD;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER budgets_lock_stripes BEFORE DELETE ON budgets
    FOR EACH ROW EXECUTE FUNCTION agentry_budget_lock_stripes();

-- (System-scoped: row-level security is forced for the owner too.)
SELECT set_config('app.system', 'on', true);

-- Every budget's counters move into its stripes: spent into stripe 0, each held reservation
-- onto its run's stripe (where its settle or release gives it back); the free remainder of
-- each limit is dealt out over the stripes.
INSERT INTO budget_stripes (tenant_id, budget_id, stripe, period_start, spent_tokens, spent_micros, reserved_tokens, reserved_micros, allowed_tokens, allowed_micros)
SELECT b.tenant_id, b.id, s.i, b.period_start,
       CASE WHEN s.i = 0 THEN b.spent_tokens ELSE 0 END, CASE WHEN s.i = 0 THEN b.spent_micros ELSE 0 END,
       coalesce(h.tokens, 0), coalesce(h.micros, 0),
       CASE WHEN b.token_limit IS NOT NULL THEN
           CASE WHEN s.i = 0 THEN b.spent_tokens ELSE 0 END + coalesce(h.tokens, 0)
           + agentry_budget_share(b.token_limit - b.spent_tokens - coalesce(t.tokens, 0), agentry_budget_stripes(), s.i) END,
       CASE WHEN b.cost_limit_micros IS NOT NULL THEN
           CASE WHEN s.i = 0 THEN b.spent_micros ELSE 0 END + coalesce(h.micros, 0)
           + agentry_budget_share(b.cost_limit_micros - b.spent_micros - coalesce(t.micros, 0), agentry_budget_stripes(), s.i) END
FROM budgets b
CROSS JOIN generate_series(0, agentry_budget_stripes() - 1) AS s(i)
LEFT JOIN LATERAL (
    SELECT sum(r.reserved_tokens)::bigint AS tokens, sum(r.reserved_micros)::bigint AS micros
    FROM reservations r
    WHERE r.tenant_id = b.tenant_id AND r.status = 'HELD' AND b.id = ANY (r.budget_ids) AND agentry_budget_stripe(r.run_id) = s.i
) h ON true
LEFT JOIN LATERAL (
    SELECT sum(r.reserved_tokens)::bigint AS tokens, sum(r.reserved_micros)::bigint AS micros
    FROM reservations r
    WHERE r.tenant_id = b.tenant_id AND r.status = 'HELD' AND b.id = ANY (r.budget_ids)
) t ON true;

ALTER TABLE budgets
    DROP COLUMN period_start,
    DROP COLUMN spent_tokens,
    DROP COLUMN spent_micros,
    DROP COLUMN reserved_tokens,
    DROP COLUMN reserved_micros;

-- A budget with the counters of its current window, added up over its stripes (what reads and
-- admission see). Row-level security applies as the reader's.
CREATE VIEW budget_totals WITH (security_invoker = true) AS
SELECT b.tenant_id, b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
       b.warned_start, b.exceeded_start,
       agentry_period_start(b.period, now()) AS period_start,
       coalesce(sum(CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_tokens END), 0)::bigint AS spent_tokens,
       coalesce(sum(CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_micros END), 0)::bigint AS spent_micros,
       coalesce(sum(s.reserved_tokens), 0)::bigint AS reserved_tokens,
       coalesce(sum(s.reserved_micros), 0)::bigint AS reserved_micros
FROM budgets b
LEFT JOIN budget_stripes s ON s.tenant_id = b.tenant_id AND s.budget_id = b.id
GROUP BY b.tenant_id, b.id;

-- +goose Down
SELECT set_config('app.system', 'on', true);
ALTER TABLE budgets
    ADD COLUMN period_start timestamptz,
    ADD COLUMN spent_tokens bigint NOT NULL DEFAULT 0 CHECK (spent_tokens >= 0),
    ADD COLUMN spent_micros bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    ADD COLUMN reserved_tokens bigint NOT NULL DEFAULT 0 CHECK (reserved_tokens >= 0),
    ADD COLUMN reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0);
UPDATE budgets b SET period_start = t.period_start, spent_tokens = t.spent_tokens, spent_micros = t.spent_micros,
    reserved_tokens = t.reserved_tokens, reserved_micros = t.reserved_micros
FROM budget_totals t WHERE t.tenant_id = b.tenant_id AND t.id = b.id;
ALTER TABLE budgets ALTER COLUMN period_start SET NOT NULL;
DROP VIEW budget_totals;
DROP TRIGGER budgets_lock_stripes ON budgets;
DROP FUNCTION agentry_budget_lock_stripes();
DROP TABLE budget_stripes;
DROP FUNCTION agentry_budget_share(bigint, bigint, integer);
DROP FUNCTION agentry_budget_stripe(uuid);
DROP FUNCTION agentry_budget_stripes();
