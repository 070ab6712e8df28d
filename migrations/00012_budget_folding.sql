-- +goose Up

-- Settlements folded into their budgets later (internal/usage/ARCHITECTURE.md). A settlement
-- marks its reservation SETTLED and pending, without locking a budget row: its actual usage is
-- not yet in its budgets' spent, and what it reserved is still in their reserved. The next
-- reservation holding every budget of a pending settlement (the same user's next call), or the
-- sweeper, folds it in: spent += actual (when it was settled in the budget's current window),
-- reserved -= what it held, pending = false, once. A budget row is then locked once per call,
-- by the reservation, instead of twice.
ALTER TABLE reservations ADD COLUMN pending boolean NOT NULL DEFAULT false;
ALTER TABLE reservations ADD CONSTRAINT reservations_pending_settled CHECK (NOT pending OR (status = 'SETTLED' AND finished_at IS NOT NULL AND actual_tokens IS NOT NULL AND actual_micros IS NOT NULL));
CREATE INDEX reservations_pending_idx ON reservations (tenant_id) WHERE pending;

-- A budget's counters as they stand: the row's (spent reset when its window is over) with its
-- pending settlements added. Every read of a budget's counters goes through it. Row-level
-- security applies as the reader (security_invoker).
CREATE VIEW budget_totals WITH (security_invoker = true) AS
SELECT b.tenant_id, b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
       agentry_period_start(b.period, now())::timestamptz AS period_start,
       ((CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END) + p.actual_tokens)::bigint AS spent_tokens,
       ((CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END) + p.actual_micros)::bigint AS spent_micros,
       (b.reserved_tokens - p.reserved_tokens)::bigint AS reserved_tokens,
       (b.reserved_micros - p.reserved_micros)::bigint AS reserved_micros,
       b.warned_start, b.exceeded_start
FROM budgets b
CROSS JOIN LATERAL (
    SELECT coalesce(sum(r.actual_tokens) FILTER (WHERE r.finished_at >= agentry_period_start(b.period, now())), 0) AS actual_tokens,
           coalesce(sum(r.actual_micros) FILTER (WHERE r.finished_at >= agentry_period_start(b.period, now())), 0) AS actual_micros,
           coalesce(sum(r.reserved_tokens), 0) AS reserved_tokens,
           coalesce(sum(r.reserved_micros), 0) AS reserved_micros
    FROM reservations r
    WHERE r.tenant_id = b.tenant_id AND r.pending AND b.id = ANY (r.budget_ids)
) p;

-- +goose Down
-- (System-scoped: row-level security is forced for the owner too.)
SELECT set_config('app.system', 'on', true);
-- Fold what is pending before the column goes.
WITH folded AS (
    UPDATE reservations r SET pending = false WHERE r.pending
    RETURNING r.tenant_id, r.budget_ids, r.reserved_tokens, r.reserved_micros, r.actual_tokens, r.actual_micros, r.finished_at
), per AS (
    SELECT f.tenant_id, x.budget_id,
           sum(f.actual_tokens) FILTER (WHERE f.finished_at >= agentry_period_start(b.period, now())) AS actual_tokens,
           sum(f.actual_micros) FILTER (WHERE f.finished_at >= agentry_period_start(b.period, now())) AS actual_micros,
           sum(f.reserved_tokens) AS reserved_tokens, sum(f.reserved_micros) AS reserved_micros
    FROM folded f, unnest(f.budget_ids) AS x(budget_id), budgets b
    WHERE b.tenant_id = f.tenant_id AND b.id = x.budget_id
    GROUP BY f.tenant_id, x.budget_id
)
UPDATE budgets b SET
    spent_tokens = (CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END) + coalesce(p.actual_tokens, 0),
    spent_micros = (CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END) + coalesce(p.actual_micros, 0),
    period_start = agentry_period_start(b.period, now()),
    reserved_tokens = b.reserved_tokens - p.reserved_tokens,
    reserved_micros = b.reserved_micros - p.reserved_micros
FROM per p
WHERE b.tenant_id = p.tenant_id AND b.id = p.budget_id;
DROP VIEW budget_totals;
DROP INDEX reservations_pending_idx;
ALTER TABLE reservations DROP CONSTRAINT reservations_pending_settled;
ALTER TABLE reservations DROP COLUMN pending;
