-- name: BudgetUpsert :one
-- Sets the one budget of (scope, user, period). A new budget starts its window with the usage
-- the window already holds; an existing one keeps its counters and takes the new limits.
INSERT INTO budgets (tenant_id, id, scope, user_id, period, token_limit, cost_limit_micros, period_start, spent_tokens, spent_micros)
SELECT sqlc.arg(tenant_id)::uuid, sqlc.arg(id)::uuid, sqlc.arg(scope)::text, sqlc.narg(user_id)::uuid, sqlc.arg(period)::text,
       sqlc.narg(token_limit)::bigint, sqlc.narg(cost_limit_micros)::bigint,
       agentry_period_start(sqlc.arg(period)::text, now()),
       coalesce(sum(u.input_tokens + u.output_tokens), 0)::bigint, coalesce(sum(u.cost_micros), 0)::bigint
FROM usage_records u
WHERE u.tenant_id = sqlc.arg(tenant_id)::uuid
  AND u.created_at >= agentry_period_start(sqlc.arg(period)::text, now())
  AND (sqlc.narg(user_id)::uuid IS NULL OR u.user_id = sqlc.narg(user_id)::uuid)
ON CONFLICT (tenant_id, scope, user_id, period) DO UPDATE SET
    token_limit = EXCLUDED.token_limit,
    cost_limit_micros = EXCLUDED.cost_limit_micros,
    updated_at = now()
RETURNING id;

-- name: BudgetList :many
-- The tenant's budgets with the counters of the current window; with user_id, only the
-- tenant-wide ones and that user's.
SELECT id, tenant_id, scope, user_id, period, token_limit, cost_limit_micros,
       agentry_period_start(period, now())::timestamptz AS period_start,
       (CASE WHEN period_start < agentry_period_start(period, now()) THEN 0 ELSE spent_tokens END)::bigint AS spent_tokens,
       (CASE WHEN period_start < agentry_period_start(period, now()) THEN 0 ELSE spent_micros END)::bigint AS spent_micros,
       reserved_tokens, reserved_micros
FROM budgets
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND (sqlc.narg(user_id)::uuid IS NULL OR scope = 'TENANT' OR user_id = sqlc.narg(user_id)::uuid)
ORDER BY scope, user_id NULLS FIRST, period;

-- name: BudgetGet :one
SELECT id, tenant_id, scope, user_id, period, token_limit, cost_limit_micros,
       agentry_period_start(period, now())::timestamptz AS period_start,
       (CASE WHEN period_start < agentry_period_start(period, now()) THEN 0 ELSE spent_tokens END)::bigint AS spent_tokens,
       (CASE WHEN period_start < agentry_period_start(period, now()) THEN 0 ELSE spent_micros END)::bigint AS spent_micros,
       reserved_tokens, reserved_micros
FROM budgets
WHERE tenant_id = sqlc.arg(tenant_id)::uuid AND id = sqlc.arg(id)::uuid;

-- name: BudgetDelete :execrows
DELETE FROM budgets WHERE tenant_id = $1 AND id = $2;

-- name: BudgetExists :one
-- Whether the tenant has any budget (the executor skips reserving when it has none).
SELECT EXISTS (SELECT 1 FROM budgets WHERE tenant_id = $1)::boolean;

-- name: BudgetExhausted :many
-- The budgets applying to the user that have nothing left (spent + reserved >= limit): new runs
-- are refused while there is one.
SELECT id, scope, period, token_limit, cost_limit_micros
FROM budgets
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND (scope = 'TENANT' OR user_id = sqlc.arg(user_id)::uuid)
  AND ((token_limit IS NOT NULL AND (CASE WHEN period_start < agentry_period_start(period, now()) THEN 0 ELSE spent_tokens END) + reserved_tokens >= token_limit)
    OR (cost_limit_micros IS NOT NULL AND (CASE WHEN period_start < agentry_period_start(period, now()) THEN 0 ELSE spent_micros END) + reserved_micros >= cost_limit_micros))
ORDER BY id;

-- name: BudgetReserve :one
-- Reserves a call's worst case on every budget applying to the user, all or nothing, in one
-- statement: the rows are locked in id order (no deadlock between concurrent reservers), the
-- verdict is taken over all of them, and only when every one has room is the reservation stored
-- (a released reservation of the same call is reused) and are they incremented: a call whose
-- reservation is held or settled already stores and adds nothing. ok is false when a budget
-- refused; budgets is how many applied; reserved is 1 when a reservation was stored.
WITH locked AS (
    SELECT b.id, b.token_limit, b.cost_limit_micros, b.reserved_tokens, b.reserved_micros,
           agentry_period_start(b.period, now()) AS cur,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END AS eff_tokens,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END AS eff_micros
    FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
    ORDER BY b.id
    FOR UPDATE
), verdict AS (
    SELECT coalesce(bool_and(
               (l.token_limit IS NULL OR l.eff_tokens + l.reserved_tokens + sqlc.arg(tokens)::bigint <= l.token_limit)
           AND (l.cost_limit_micros IS NULL OR l.eff_micros + l.reserved_micros + sqlc.arg(micros)::bigint <= l.cost_limit_micros)), true) AS ok,
           count(*) AS n
    FROM locked l
), ins AS (
    INSERT INTO reservations (tenant_id, id, run_id, call_index, attempt, budget_ids, reserved_tokens, reserved_micros, expires_at)
    SELECT sqlc.arg(tenant_id)::uuid, sqlc.arg(id)::uuid, sqlc.arg(run_id)::uuid, sqlc.arg(call_index)::integer,
           sqlc.arg(attempt)::integer, array_agg(l.id ORDER BY l.id), sqlc.arg(tokens)::bigint, sqlc.arg(micros)::bigint, sqlc.arg(expires_at)::timestamptz
    FROM locked l, verdict v
    WHERE v.ok
    HAVING count(*) > 0
    ON CONFLICT (tenant_id, run_id, call_index) DO UPDATE SET
        attempt = EXCLUDED.attempt, budget_ids = EXCLUDED.budget_ids,
        reserved_tokens = EXCLUDED.reserved_tokens, reserved_micros = EXCLUDED.reserved_micros,
        actual_tokens = NULL, actual_micros = NULL, status = 'HELD',
        created_at = now(), expires_at = EXCLUDED.expires_at, finished_at = NULL
    WHERE reservations.status = 'RELEASED'
    RETURNING id
), upd AS (
    -- Only a reservation stored holds anything: a call whose reservation is held or settled
    -- already adds nothing.
    UPDATE budgets b SET
        period_start = l.cur,
        spent_tokens = l.eff_tokens,
        spent_micros = l.eff_micros,
        reserved_tokens = b.reserved_tokens + sqlc.arg(tokens)::bigint,
        reserved_micros = b.reserved_micros + sqlc.arg(micros)::bigint,
        updated_at = now()
    FROM locked l
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = l.id AND EXISTS (SELECT 1 FROM ins)
)
SELECT v.ok::boolean AS ok, v.n::bigint AS budgets, (SELECT count(*) FROM ins)::bigint AS reserved
FROM verdict v;

-- name: BudgetRefuse :many
-- After a refused reservation (in its transaction, the rows still locked): the budgets that
-- have no room for it, marked exceeded for their window. notify is true the first time in the
-- window (one budget.exceeded event per window).
WITH refusing AS (
    SELECT b.id, b.exceeded_start, agentry_period_start(b.period, now()) AS cur
    FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
      AND ((b.token_limit IS NOT NULL AND (CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END) + b.reserved_tokens + sqlc.arg(tokens)::bigint > b.token_limit)
        OR (b.cost_limit_micros IS NOT NULL AND (CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END) + b.reserved_micros + sqlc.arg(micros)::bigint > b.cost_limit_micros))
)
UPDATE budgets b SET exceeded_start = r.cur
FROM refusing r
WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = r.id
RETURNING b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
          (CASE WHEN b.period_start < r.cur THEN 0 ELSE b.spent_tokens END)::bigint AS spent_tokens,
          (CASE WHEN b.period_start < r.cur THEN 0 ELSE b.spent_micros END)::bigint AS spent_micros,
          b.reserved_tokens, b.reserved_micros,
          (r.exceeded_start IS DISTINCT FROM r.cur)::boolean AS notify;

-- name: BudgetSettle :many
-- Settles a call exactly once, in the transaction that stores its reply and usage record: its
-- reservation becomes SETTLED, the actual usage is added to every budget applying to the user
-- and what the reservation held (if it still held it) is given back. Nothing happens when the
-- call was settled before. warn / exceed are true when this call crossed 80% / 100% of a
-- limit for the first time in the window.
WITH res AS (
    SELECT r.id, r.status, r.budget_ids, r.reserved_tokens, r.reserved_micros
    FROM reservations r
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.run_id = sqlc.arg(run_id)::uuid AND r.call_index = sqlc.arg(call_index)::integer
    FOR UPDATE
), mark AS (
    UPDATE reservations r SET status = 'SETTLED', actual_tokens = sqlc.arg(tokens)::bigint, actual_micros = sqlc.arg(micros)::bigint, finished_at = now()
    FROM res
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = res.id AND res.status <> 'SETTLED'
    RETURNING r.id
), locked AS (
    SELECT b.id, agentry_period_start(b.period, now()) AS cur, b.warned_start, b.exceeded_start,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END + sqlc.arg(tokens)::bigint AS new_tokens,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END + sqlc.arg(micros)::bigint AS new_micros
    FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
      AND NOT EXISTS (SELECT 1 FROM res WHERE res.status = 'SETTLED')
    ORDER BY b.id
    FOR UPDATE
), held AS (
    SELECT unnest(res.budget_ids) AS budget_id, res.reserved_tokens, res.reserved_micros FROM res WHERE res.status = 'HELD'
), nxt AS (
    SELECT l.id, l.cur, l.warned_start, l.exceeded_start, l.new_tokens, l.new_micros,
           coalesce(h.reserved_tokens, 0) AS free_tokens, coalesce(h.reserved_micros, 0) AS free_micros
    FROM locked l LEFT JOIN held h ON h.budget_id = l.id
)
UPDATE budgets b SET
    period_start = n.cur,
    spent_tokens = n.new_tokens,
    spent_micros = n.new_micros,
    reserved_tokens = b.reserved_tokens - n.free_tokens,
    reserved_micros = b.reserved_micros - n.free_micros,
    warned_start = CASE WHEN (b.token_limit IS NOT NULL AND n.new_tokens * 5 >= b.token_limit * 4)
                          OR (b.cost_limit_micros IS NOT NULL AND n.new_micros * 5 >= b.cost_limit_micros * 4)
                        THEN n.cur ELSE b.warned_start END,
    exceeded_start = CASE WHEN (b.token_limit IS NOT NULL AND n.new_tokens >= b.token_limit)
                            OR (b.cost_limit_micros IS NOT NULL AND n.new_micros >= b.cost_limit_micros)
                          THEN n.cur ELSE b.exceeded_start END,
    updated_at = now()
FROM nxt n
WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = n.id
RETURNING b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
          b.spent_tokens, b.spent_micros, b.reserved_tokens, b.reserved_micros,
          (b.warned_start IS NOT DISTINCT FROM n.cur AND n.warned_start IS DISTINCT FROM n.cur)::boolean AS warn,
          (b.exceeded_start IS NOT DISTINCT FROM n.cur AND n.exceeded_start IS DISTINCT FROM n.cur)::boolean AS exceed;

-- name: ReservationRelease :execrows
-- Releases the held reservations of a run made by one attempt (call_index: that call only; NULL:
-- every call) or, with earlier, by every attempt before it: their amounts go back to their
-- budgets. A reservation is released at most once (only HELD ones change).
WITH res AS (
    UPDATE reservations r SET status = 'RELEASED', finished_at = now()
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.run_id = sqlc.arg(run_id)::uuid AND r.status = 'HELD'
      AND (sqlc.narg(call_index)::integer IS NULL OR r.call_index = sqlc.narg(call_index)::integer)
      AND (CASE WHEN sqlc.arg(earlier)::boolean THEN r.attempt < sqlc.arg(attempt)::integer ELSE r.attempt = sqlc.arg(attempt)::integer END)
    RETURNING r.budget_ids, r.reserved_tokens, r.reserved_micros
), freed AS (
    SELECT f.budget_id, sum(res.reserved_tokens) AS tokens, sum(res.reserved_micros) AS micros
    FROM res, unnest(res.budget_ids) AS f(budget_id)
    GROUP BY f.budget_id
), locked AS (
    SELECT b.id FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id IN (SELECT budget_id FROM freed)
    ORDER BY b.id
    FOR UPDATE
)
UPDATE budgets b SET
    reserved_tokens = b.reserved_tokens - f.tokens,
    reserved_micros = b.reserved_micros - f.micros,
    updated_at = now()
FROM freed f
WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = f.budget_id AND b.id IN (SELECT id FROM locked);

-- name: ReservationReleaseDead :many
-- The sweeper (every tenant, in a system transaction): releases held reservations whose run is
-- gone, not RUNNING, run by a newer attempt, or whose lease or own deadline expired. A
-- reservation younger than 30 s is left alone: the statement's view of the run may predate the
-- attempt that just made it. Each is released exactly once (status HELD -> RELEASED under its
-- row lock); their amounts go back to their budgets.
WITH dead AS (
    SELECT r.tenant_id, r.id
    FROM reservations r
    LEFT JOIN runs ON runs.tenant_id = r.tenant_id AND runs.id = r.run_id
    WHERE r.status = 'HELD' AND r.created_at < now() - interval '30 seconds'
      AND (r.expires_at < now() OR runs.id IS NULL OR runs.status <> 'RUNNING'
           OR runs.attempt > r.attempt OR runs.lease_expires_at < now())
    ORDER BY r.expires_at
    LIMIT sqlc.arg(lim)
    FOR UPDATE OF r SKIP LOCKED
), res AS (
    UPDATE reservations r SET status = 'RELEASED', finished_at = now()
    FROM dead d
    WHERE r.tenant_id = d.tenant_id AND r.id = d.id AND r.status = 'HELD'
    RETURNING r.tenant_id, r.id, r.run_id, r.call_index, r.budget_ids, r.reserved_tokens, r.reserved_micros
), freed AS (
    SELECT res.tenant_id, f.budget_id, sum(res.reserved_tokens) AS tokens, sum(res.reserved_micros) AS micros
    FROM res, unnest(res.budget_ids) AS f(budget_id)
    GROUP BY res.tenant_id, f.budget_id
), locked AS (
    SELECT b.tenant_id, b.id FROM budgets b
    JOIN freed f ON f.tenant_id = b.tenant_id AND f.budget_id = b.id
    ORDER BY b.id
    FOR UPDATE OF b
), upd AS (
    UPDATE budgets b SET
        reserved_tokens = b.reserved_tokens - f.tokens,
        reserved_micros = b.reserved_micros - f.micros,
        updated_at = now()
    FROM freed f
    WHERE b.tenant_id = f.tenant_id AND b.id = f.budget_id AND b.id IN (SELECT id FROM locked)
    RETURNING b.id
)
SELECT res.tenant_id, res.id, res.run_id, res.call_index FROM res;

-- name: UsageSummary :many
-- A tenant's usage in [from_at, to_at) grouped by DAY, USER, MODEL or RUN_KIND (user_id: only
-- that user's): whole days in [lo, hi) from usage_daily, the rest from usage_records.
SELECT x.key::text AS key, sum(x.calls)::bigint AS calls, sum(x.input_tokens)::bigint AS input_tokens,
       sum(x.output_tokens)::bigint AS output_tokens, sum(x.cost_micros)::bigint AS cost_micros
FROM (
    SELECT CASE sqlc.arg(group_by)::text
               WHEN 'DAY' THEN to_char(d.day AT TIME ZONE 'UTC', 'YYYY-MM-DD')
               WHEN 'USER' THEN d.user_id::text
               WHEN 'MODEL' THEN d.provider || ':' || d.model
               ELSE d.run_kind END AS key,
           d.calls, d.input_tokens, d.output_tokens, d.cost_micros
    FROM usage_daily d
    WHERE d.tenant_id = sqlc.arg(tenant_id)::uuid AND d.day >= sqlc.arg(lo)::timestamptz AND d.day < sqlc.arg(hi)::timestamptz
      AND (sqlc.narg(user_id)::uuid IS NULL OR d.user_id = sqlc.narg(user_id)::uuid)
    UNION ALL
    SELECT CASE sqlc.arg(group_by)::text
               WHEN 'DAY' THEN to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
               WHEN 'USER' THEN u.user_id::text
               WHEN 'MODEL' THEN u.provider || ':' || u.model
               ELSE u.run_kind END,
           1, u.input_tokens, u.output_tokens, u.cost_micros
    FROM usage_records u
    WHERE u.tenant_id = sqlc.arg(tenant_id)::uuid AND u.created_at >= sqlc.arg(from_at)::timestamptz AND u.created_at < sqlc.arg(lo)::timestamptz
      AND (sqlc.narg(user_id)::uuid IS NULL OR u.user_id = sqlc.narg(user_id)::uuid)
    UNION ALL
    SELECT CASE sqlc.arg(group_by)::text
               WHEN 'DAY' THEN to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
               WHEN 'USER' THEN u.user_id::text
               WHEN 'MODEL' THEN u.provider || ':' || u.model
               ELSE u.run_kind END,
           1, u.input_tokens, u.output_tokens, u.cost_micros
    FROM usage_records u
    WHERE u.tenant_id = sqlc.arg(tenant_id)::uuid AND u.created_at >= sqlc.arg(hi)::timestamptz AND u.created_at < sqlc.arg(to_at)::timestamptz
      AND (sqlc.narg(user_id)::uuid IS NULL OR u.user_id = sqlc.narg(user_id)::uuid)
) x
GROUP BY x.key
ORDER BY x.key;

-- name: UsagePlatformSummary :many
-- Every tenant's usage in [from_at, to_at) grouped by TENANT, DAY or MODEL (a system
-- transaction): whole days in [lo, hi) from usage_daily, the rest from usage_records.
SELECT x.key::text AS key, sum(x.calls)::bigint AS calls, sum(x.input_tokens)::bigint AS input_tokens,
       sum(x.output_tokens)::bigint AS output_tokens, sum(x.cost_micros)::bigint AS cost_micros
FROM (
    SELECT CASE sqlc.arg(group_by)::text
               WHEN 'DAY' THEN to_char(d.day AT TIME ZONE 'UTC', 'YYYY-MM-DD')
               WHEN 'MODEL' THEN d.provider || ':' || d.model
               ELSE d.tenant_id::text END AS key,
           d.calls, d.input_tokens, d.output_tokens, d.cost_micros
    FROM usage_daily d
    WHERE d.day >= sqlc.arg(lo)::timestamptz AND d.day < sqlc.arg(hi)::timestamptz
    UNION ALL
    SELECT CASE sqlc.arg(group_by)::text
               WHEN 'DAY' THEN to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
               WHEN 'MODEL' THEN u.provider || ':' || u.model
               ELSE u.tenant_id::text END,
           1, u.input_tokens, u.output_tokens, u.cost_micros
    FROM usage_records u
    WHERE u.created_at >= sqlc.arg(from_at)::timestamptz AND u.created_at < sqlc.arg(lo)::timestamptz
    UNION ALL
    SELECT CASE sqlc.arg(group_by)::text
               WHEN 'DAY' THEN to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
               WHEN 'MODEL' THEN u.provider || ':' || u.model
               ELSE u.tenant_id::text END,
           1, u.input_tokens, u.output_tokens, u.cost_micros
    FROM usage_records u
    WHERE u.created_at >= sqlc.arg(hi)::timestamptz AND u.created_at < sqlc.arg(to_at)::timestamptz
) x
GROUP BY x.key
ORDER BY x.key;

-- name: UsageRollupStateLock :one
SELECT rolled_through FROM usage_rollup_state FOR UPDATE;

-- name: UsageRollupStateSet :exec
UPDATE usage_rollup_state SET rolled_through = $1;

-- name: UsageRollupState :one
SELECT rolled_through FROM usage_rollup_state;

-- name: UsageFirstRecordSince :one
-- The time of the oldest usage record at or after since (any tenant); no row when there is none.
SELECT created_at FROM usage_records WHERE created_at >= $1 ORDER BY created_at LIMIT 1;

-- name: UsageRollupDay :execrows
-- Rolls up every tenant's usage records of the UTC day starting at day into usage_daily
-- (recomputed, so running it twice changes nothing).
INSERT INTO usage_daily (tenant_id, day, user_id, run_kind, provider, model, calls, input_tokens, output_tokens, cached_tokens, cost_micros)
SELECT u.tenant_id, sqlc.arg(day)::timestamptz, u.user_id, u.run_kind, u.provider, u.model, count(*),
       sum(u.input_tokens), sum(u.output_tokens), sum(u.cached_tokens), sum(u.cost_micros)
FROM usage_records u
WHERE u.created_at >= sqlc.arg(day)::timestamptz AND u.created_at < sqlc.arg(day)::timestamptz + interval '1 day'
GROUP BY u.tenant_id, u.user_id, u.run_kind, u.provider, u.model
ON CONFLICT (tenant_id, day, user_id, run_kind, provider, model) DO UPDATE SET
    calls = EXCLUDED.calls, input_tokens = EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens,
    cached_tokens = EXCLUDED.cached_tokens, cost_micros = EXCLUDED.cost_micros;
