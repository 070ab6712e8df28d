-- A budget's counters live in its stripes (budget_stripes, migration 00012): a call reserves on
-- and settles to its run's stripe (agentry_budget_stripe), whose allowance is its share of the
-- budget's limits; reads add the stripes up (the budget_totals view).

-- name: BudgetUpsert :one
-- Sets the one budget of (scope, user, period): a new one, or new limits for the existing one
-- (its counters stay). BudgetStripesSet then deals its limits out over its stripes.
INSERT INTO budgets (tenant_id, id, scope, user_id, period, token_limit, cost_limit_micros)
VALUES (sqlc.arg(tenant_id)::uuid, sqlc.arg(id)::uuid, sqlc.arg(scope)::text, sqlc.narg(user_id)::uuid, sqlc.arg(period)::text,
        sqlc.narg(token_limit)::bigint, sqlc.narg(cost_limit_micros)::bigint)
ON CONFLICT (tenant_id, scope, user_id, period) DO UPDATE SET
    token_limit = EXCLUDED.token_limit,
    cost_limit_micros = EXCLUDED.cost_limit_micros,
    updated_at = now()
RETURNING id;

-- name: BudgetStripesSet :exec
-- Deals a budget's limits out over its stripes, every stripe locked: a new budget's stripes are
-- created, stripe 0 starting with the usage its window already holds; an existing budget's keep
-- their counters. Each stripe is allowed what it uses plus its share of what is left (the
-- allowances add up to the limits). The budget's row must be locked already (BudgetUpsert,
-- BudgetLock), so that the limits read are those the stripes end up with.
WITH bud AS (
    SELECT b.tenant_id, b.id, b.user_id, b.token_limit, b.cost_limit_micros, agentry_period_start(b.period, now()) AS cur
    FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = sqlc.arg(id)::uuid
), old AS (
    SELECT s.stripe, s.reserved_tokens, s.reserved_micros,
           CASE WHEN s.period_start < bud.cur THEN 0 ELSE s.spent_tokens END AS spent_tokens,
           CASE WHEN s.period_start < bud.cur THEN 0 ELSE s.spent_micros END AS spent_micros
    FROM budget_stripes s, bud
    WHERE s.tenant_id = sqlc.arg(tenant_id)::uuid AND s.budget_id = sqlc.arg(id)::uuid
    ORDER BY s.stripe
    FOR UPDATE OF s
), seen AS (
    SELECT coalesce(sum(u.input_tokens + u.output_tokens), 0)::bigint AS tokens, coalesce(sum(u.cost_micros), 0)::bigint AS micros
    FROM usage_records u, bud
    WHERE NOT EXISTS (SELECT 1 FROM old)
      AND u.tenant_id = sqlc.arg(tenant_id)::uuid AND u.created_at >= bud.cur
      AND (bud.user_id IS NULL OR u.user_id = bud.user_id)
), used AS (
    SELECT i.i::smallint AS stripe,
           coalesce(o.spent_tokens, CASE WHEN i.i = 0 THEN seen.tokens ELSE 0 END) AS spent_tokens,
           coalesce(o.spent_micros, CASE WHEN i.i = 0 THEN seen.micros ELSE 0 END) AS spent_micros,
           coalesce(o.reserved_tokens, 0) AS reserved_tokens, coalesce(o.reserved_micros, 0) AS reserved_micros
    FROM generate_series(0, agentry_budget_stripes() - 1) AS i(i)
    CROSS JOIN seen
    LEFT JOIN old o ON o.stripe = i.i
), total AS (
    SELECT sum(spent_tokens + reserved_tokens)::bigint AS tokens, sum(spent_micros + reserved_micros)::bigint AS micros, count(*) AS n
    FROM used
)
INSERT INTO budget_stripes (tenant_id, budget_id, stripe, period_start, spent_tokens, spent_micros, reserved_tokens, reserved_micros, allowed_tokens, allowed_micros)
SELECT bud.tenant_id, bud.id, u.stripe, bud.cur, u.spent_tokens, u.spent_micros, u.reserved_tokens, u.reserved_micros,
       CASE WHEN bud.token_limit IS NOT NULL THEN u.spent_tokens + u.reserved_tokens + agentry_budget_share(bud.token_limit - t.tokens, t.n, u.stripe) END,
       CASE WHEN bud.cost_limit_micros IS NOT NULL THEN u.spent_micros + u.reserved_micros + agentry_budget_share(bud.cost_limit_micros - t.micros, t.n, u.stripe) END
FROM bud, used u, total t
ON CONFLICT (tenant_id, budget_id, stripe) DO UPDATE SET
    period_start = greatest(budget_stripes.period_start, EXCLUDED.period_start),
    spent_tokens = EXCLUDED.spent_tokens,
    spent_micros = EXCLUDED.spent_micros,
    allowed_tokens = EXCLUDED.allowed_tokens,
    allowed_micros = EXCLUDED.allowed_micros;

-- name: BudgetLock :exec
-- Locks a budget's row (before its stripes: BudgetStripesSet then reads the limits as they are).
SELECT id FROM budgets WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE;

-- name: BudgetList :many
-- The tenant's budgets with the counters of the current window; with user_id, only the
-- tenant-wide ones and that user's.
SELECT id, tenant_id, scope, user_id, period, token_limit, cost_limit_micros, period_start,
       spent_tokens, spent_micros, reserved_tokens, reserved_micros
FROM budget_totals
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND (sqlc.narg(user_id)::uuid IS NULL OR scope = 'TENANT' OR user_id = sqlc.narg(user_id)::uuid)
ORDER BY scope, user_id NULLS FIRST, period;

-- name: BudgetGet :one
SELECT id, tenant_id, scope, user_id, period, token_limit, cost_limit_micros, period_start,
       spent_tokens, spent_micros, reserved_tokens, reserved_micros
FROM budget_totals
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
FROM budget_totals
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND (scope = 'TENANT' OR user_id = sqlc.arg(user_id)::uuid)
  AND ((token_limit IS NOT NULL AND spent_tokens + reserved_tokens >= token_limit)
    OR (cost_limit_micros IS NOT NULL AND spent_micros + reserved_micros >= cost_limit_micros))
ORDER BY id;

-- name: BudgetReserve :one
-- Reserves a call's worst case on its run's stripe of every budget applying to the user, all or
-- nothing, in one statement: those stripes are locked in budget order (no deadlock between
-- concurrent reservers), the verdict is taken over all of them against their allowances, and
-- only when every one has room is the reservation stored (a released reservation of the same
-- call is reused) and are they incremented: a call whose reservation is held or settled already
-- stores and adds nothing. ok is false when a stripe has no room, or is missing (BudgetReserveAll
-- then decides on the budgets' totals); budgets is how many applied; reserved is 1 when a
-- reservation was stored.
WITH applying AS (
    SELECT count(*) AS n FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
), locked AS (
    SELECT s.budget_id AS id, s.stripe, s.allowed_tokens, s.allowed_micros, s.reserved_tokens, s.reserved_micros,
           agentry_period_start(b.period, now()) AS cur,
           CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_tokens END AS eff_tokens,
           CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_micros END AS eff_micros
    FROM budgets b
    JOIN budget_stripes s ON s.tenant_id = b.tenant_id AND s.budget_id = b.id AND s.stripe = agentry_budget_stripe(sqlc.arg(run_id)::uuid)
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
    ORDER BY s.budget_id
    FOR UPDATE OF s
), verdict AS (
    SELECT coalesce(bool_and(
               (l.allowed_tokens IS NULL OR l.eff_tokens + l.reserved_tokens + sqlc.arg(tokens)::bigint <= l.allowed_tokens)
           AND (l.allowed_micros IS NULL OR l.eff_micros + l.reserved_micros + sqlc.arg(micros)::bigint <= l.allowed_micros)), true)
           AND count(*) = (SELECT n FROM applying) AS ok,
           (SELECT n FROM applying) AS n
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
    UPDATE budget_stripes s SET
        period_start = greatest(s.period_start, l.cur),
        spent_tokens = l.eff_tokens,
        spent_micros = l.eff_micros,
        reserved_tokens = s.reserved_tokens + sqlc.arg(tokens)::bigint,
        reserved_micros = s.reserved_micros + sqlc.arg(micros)::bigint
    FROM locked l
    WHERE s.tenant_id = sqlc.arg(tenant_id)::uuid AND s.budget_id = l.id AND s.stripe = l.stripe AND EXISTS (SELECT 1 FROM ins)
)
SELECT v.ok::boolean AS ok, v.n::bigint AS budgets, (SELECT count(*) FROM ins)::bigint AS reserved
FROM verdict v;

-- name: BudgetReserveAll :one
-- BudgetReserve when a stripe had no room: every stripe of every budget applying to the user is
-- locked (in budget and stripe order), the verdict is taken on each budget's totals against its
-- limits, and when all have room the reservation is stored on the run's stripe and what is left
-- of each limit is dealt out over the stripes again (each is allowed what it uses plus its
-- share). A budget's limits are taken as what its stripes are allowed together (always equal to
-- them, and read from the rows just locked: a setBudget this statement waited for counts). ok is
-- false when a budget refused, or lacks stripes (nothing is stored: BudgetRefuse follows).
WITH applying AS (
    SELECT count(*) AS n FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
), locked AS (
    SELECT s.budget_id AS id, s.stripe, s.reserved_tokens, s.reserved_micros, s.allowed_tokens, s.allowed_micros,
           s.stripe = agentry_budget_stripe(sqlc.arg(run_id)::uuid) AS mine,
           agentry_period_start(b.period, now()) AS cur,
           CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_tokens END AS eff_tokens,
           CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_micros END AS eff_micros
    FROM budgets b
    JOIN budget_stripes s ON s.tenant_id = b.tenant_id AND s.budget_id = b.id
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
    ORDER BY s.budget_id, s.stripe
    FOR UPDATE OF s
), placed AS (
    -- Each stripe's place among its budget's, which orders the shares.
    SELECT l.*, (row_number() OVER (PARTITION BY l.id ORDER BY l.stripe) - 1)::integer AS pos
    FROM locked l
), totals AS (
    SELECT l.id, sum(l.allowed_tokens)::bigint AS token_limit, sum(l.allowed_micros)::bigint AS cost_limit_micros,
           sum(l.eff_tokens + l.reserved_tokens)::bigint AS used_tokens, sum(l.eff_micros + l.reserved_micros)::bigint AS used_micros,
           count(*) AS n, bool_or(l.mine) AS has_mine
    FROM locked l
    GROUP BY l.id
), verdict AS (
    SELECT coalesce(bool_and(t.has_mine
           AND (t.token_limit IS NULL OR t.used_tokens + sqlc.arg(tokens)::bigint <= t.token_limit)
           AND (t.cost_limit_micros IS NULL OR t.used_micros + sqlc.arg(micros)::bigint <= t.cost_limit_micros)), true)
           AND count(*) = (SELECT n FROM applying) AS ok,
           (SELECT n FROM applying) AS n
    FROM totals t
), ins AS (
    INSERT INTO reservations (tenant_id, id, run_id, call_index, attempt, budget_ids, reserved_tokens, reserved_micros, expires_at)
    SELECT sqlc.arg(tenant_id)::uuid, sqlc.arg(id)::uuid, sqlc.arg(run_id)::uuid, sqlc.arg(call_index)::integer,
           sqlc.arg(attempt)::integer, array_agg(t.id ORDER BY t.id), sqlc.arg(tokens)::bigint, sqlc.arg(micros)::bigint, sqlc.arg(expires_at)::timestamptz
    FROM totals t, verdict v
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
    UPDATE budget_stripes s SET
        period_start = greatest(s.period_start, l.cur),
        spent_tokens = l.eff_tokens,
        spent_micros = l.eff_micros,
        reserved_tokens = s.reserved_tokens + CASE WHEN l.mine THEN sqlc.arg(tokens)::bigint ELSE 0 END,
        reserved_micros = s.reserved_micros + CASE WHEN l.mine THEN sqlc.arg(micros)::bigint ELSE 0 END,
        allowed_tokens = CASE WHEN t.token_limit IS NOT NULL THEN
            l.eff_tokens + l.reserved_tokens + CASE WHEN l.mine THEN sqlc.arg(tokens)::bigint ELSE 0 END
            + agentry_budget_share(t.token_limit - t.used_tokens - sqlc.arg(tokens)::bigint, t.n, l.pos) END,
        allowed_micros = CASE WHEN t.cost_limit_micros IS NOT NULL THEN
            l.eff_micros + l.reserved_micros + CASE WHEN l.mine THEN sqlc.arg(micros)::bigint ELSE 0 END
            + agentry_budget_share(t.cost_limit_micros - t.used_micros - sqlc.arg(micros)::bigint, t.n, l.pos) END
    FROM placed l
    JOIN totals t ON t.id = l.id
    WHERE s.tenant_id = sqlc.arg(tenant_id)::uuid AND s.budget_id = l.id AND s.stripe = l.stripe AND EXISTS (SELECT 1 FROM ins)
)
SELECT v.ok::boolean AS ok, v.n::bigint AS budgets, (SELECT count(*) FROM ins)::bigint AS reserved
FROM verdict v;

-- name: BudgetRefuse :many
-- After a refused BudgetReserveAll (in its transaction, the stripes still locked): the budgets
-- that have no room for the call. notify is true when this marked the budget exceeded for its
-- window (one budget.exceeded event per window); a budget row another transaction holds is not
-- waited for (it is never locked after stripes by waiting): the next refusal marks it.
WITH refusing AS (
    SELECT t.id, t.scope, t.user_id, t.period, t.token_limit, t.cost_limit_micros, t.period_start AS cur,
           t.spent_tokens, t.spent_micros, t.reserved_tokens, t.reserved_micros
    FROM budget_totals t
    WHERE t.tenant_id = sqlc.arg(tenant_id)::uuid AND (t.scope = 'TENANT' OR t.user_id = sqlc.arg(user_id)::uuid)
      AND ((t.token_limit IS NOT NULL AND t.spent_tokens + t.reserved_tokens + sqlc.arg(tokens)::bigint > t.token_limit)
        OR (t.cost_limit_micros IS NOT NULL AND t.spent_micros + t.reserved_micros + sqlc.arg(micros)::bigint > t.cost_limit_micros))
), free AS (
    SELECT b.id
    FROM budgets b
    JOIN refusing r ON r.id = b.id
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.exceeded_start IS DISTINCT FROM r.cur
    FOR NO KEY UPDATE OF b SKIP LOCKED
), marked AS (
    UPDATE budgets b SET exceeded_start = r.cur, updated_at = now()
    FROM free f
    JOIN refusing r ON r.id = f.id
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = f.id
    RETURNING b.id
)
SELECT r.id, r.scope, r.user_id, r.period, r.token_limit, r.cost_limit_micros,
       r.spent_tokens, r.spent_micros, r.reserved_tokens, r.reserved_micros,
       (r.id IN (SELECT id FROM marked))::boolean AS notify
FROM refusing r
ORDER BY r.id;

-- name: BudgetSettle :many
-- Settles a call exactly once, in the transaction that stores its reply and usage record: its
-- reservation becomes SETTLED, the actual usage is added to the run's stripe of every budget
-- applying to the user and what the reservation held there (if it still held it) is given back.
-- Nothing happens when the call was settled before. The rows returned are the budgets this
-- settlement marked or left over: warn / exceed are true when it found 80% / 100% of a limit
-- spent in the window for the first time (its own stripe as just written, the others as
-- committed; two settlements crossing together may both see less, and the next one marks it),
-- with the totals it found; over is true when the call's overage left the stripe above its
-- allowance (the budget is then dealt out again: BudgetStripesSet). A budget row another
-- transaction holds is not waited for (never locked after stripes by waiting).
WITH res AS (
    SELECT r.id, r.status, r.budget_ids, r.reserved_tokens, r.reserved_micros
    FROM reservations r
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.run_id = sqlc.arg(run_id)::uuid AND r.call_index = sqlc.arg(call_index)::integer
    FOR UPDATE
), mark AS (
    -- By the call's key, which finds the one row: joined on id alone, the plan scanned every
    -- reservation of the tenant.
    UPDATE reservations r SET status = 'SETTLED', actual_tokens = sqlc.arg(tokens)::bigint, actual_micros = sqlc.arg(micros)::bigint, finished_at = now()
    FROM res
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.run_id = sqlc.arg(run_id)::uuid AND r.call_index = sqlc.arg(call_index)::integer
      AND r.id = res.id AND res.status <> 'SETTLED'
    RETURNING r.id
), locked AS (
    SELECT s.budget_id AS id, s.stripe, agentry_period_start(b.period, now()) AS cur,
           CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_tokens END + sqlc.arg(tokens)::bigint AS new_tokens,
           CASE WHEN s.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE s.spent_micros END + sqlc.arg(micros)::bigint AS new_micros
    FROM budgets b
    JOIN budget_stripes s ON s.tenant_id = b.tenant_id AND s.budget_id = b.id AND s.stripe = agentry_budget_stripe(sqlc.arg(run_id)::uuid)
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
      AND NOT EXISTS (SELECT 1 FROM res WHERE res.status = 'SETTLED')
    ORDER BY s.budget_id
    FOR UPDATE OF s
), held AS (
    SELECT unnest(res.budget_ids) AS budget_id, res.reserved_tokens, res.reserved_micros FROM res WHERE res.status = 'HELD'
), upd AS (
    UPDATE budget_stripes s SET
        period_start = greatest(s.period_start, l.cur),
        spent_tokens = l.new_tokens,
        spent_micros = l.new_micros,
        reserved_tokens = s.reserved_tokens - coalesce(h.reserved_tokens, 0),
        reserved_micros = s.reserved_micros - coalesce(h.reserved_micros, 0)
    FROM locked l
    LEFT JOIN held h ON h.budget_id = l.id
    WHERE s.tenant_id = sqlc.arg(tenant_id)::uuid AND s.budget_id = l.id AND s.stripe = l.stripe
    RETURNING s.budget_id, l.cur, s.spent_tokens, s.spent_micros, s.reserved_tokens, s.reserved_micros,
              (s.spent_tokens + s.reserved_tokens > s.allowed_tokens OR s.spent_micros + s.reserved_micros > s.allowed_micros) AS over
), totals AS (
    -- Only budgets with a limit not yet marked both ways in the window are added up.
    SELECT b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros, u.cur,
           u.spent_tokens + o.spent_tokens AS spent_tokens, u.spent_micros + o.spent_micros AS spent_micros,
           u.reserved_tokens + o.reserved_tokens AS reserved_tokens, u.reserved_micros + o.reserved_micros AS reserved_micros
    FROM upd u
    JOIN budgets b ON b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = u.budget_id
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(CASE WHEN x.period_start < u.cur THEN 0 ELSE x.spent_tokens END), 0)::bigint AS spent_tokens,
               coalesce(sum(CASE WHEN x.period_start < u.cur THEN 0 ELSE x.spent_micros END), 0)::bigint AS spent_micros,
               coalesce(sum(x.reserved_tokens), 0)::bigint AS reserved_tokens, coalesce(sum(x.reserved_micros), 0)::bigint AS reserved_micros
        FROM budget_stripes x
        WHERE x.tenant_id = sqlc.arg(tenant_id)::uuid AND x.budget_id = u.budget_id AND x.stripe <> agentry_budget_stripe(sqlc.arg(run_id)::uuid)
    ) o
    WHERE (b.token_limit IS NOT NULL OR b.cost_limit_micros IS NOT NULL)
      AND (b.warned_start IS DISTINCT FROM u.cur OR b.exceeded_start IS DISTINCT FROM u.cur)
), crossing AS (
    SELECT t.*,
           ((t.token_limit IS NOT NULL AND t.spent_tokens * 5 >= t.token_limit * 4)
             OR (t.cost_limit_micros IS NOT NULL AND t.spent_micros * 5 >= t.cost_limit_micros * 4)) AS at_warn,
           ((t.token_limit IS NOT NULL AND t.spent_tokens >= t.token_limit)
             OR (t.cost_limit_micros IS NOT NULL AND t.spent_micros >= t.cost_limit_micros)) AS at_exceed
    FROM totals t
), free AS (
    SELECT b.id, b.warned_start, b.exceeded_start
    FROM budgets b
    JOIN crossing c ON c.id = b.id
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid
      AND ((c.at_warn AND b.warned_start IS DISTINCT FROM c.cur) OR (c.at_exceed AND b.exceeded_start IS DISTINCT FROM c.cur))
    FOR NO KEY UPDATE OF b SKIP LOCKED
), marked AS (
    UPDATE budgets b SET
        warned_start = CASE WHEN c.at_warn THEN c.cur ELSE b.warned_start END,
        exceeded_start = CASE WHEN c.at_exceed THEN c.cur ELSE b.exceeded_start END,
        updated_at = now()
    FROM free f
    JOIN crossing c ON c.id = f.id
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = f.id
    RETURNING b.id, (c.at_warn AND f.warned_start IS DISTINCT FROM c.cur) AS warn, (c.at_exceed AND f.exceeded_start IS DISTINCT FROM c.cur) AS exceed
)
SELECT b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
       coalesce(c.spent_tokens, 0)::bigint AS spent_tokens, coalesce(c.spent_micros, 0)::bigint AS spent_micros,
       coalesce(c.reserved_tokens, 0)::bigint AS reserved_tokens, coalesce(c.reserved_micros, 0)::bigint AS reserved_micros,
       coalesce(m.warn, false)::boolean AS warn, coalesce(m.exceed, false)::boolean AS exceed,
       coalesce(u.over, false)::boolean AS over
FROM upd u
JOIN budgets b ON b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = u.budget_id
LEFT JOIN crossing c ON c.id = u.budget_id
LEFT JOIN marked m ON m.id = u.budget_id
WHERE m.id IS NOT NULL OR u.over
ORDER BY b.id;

-- name: ReservationRelease :execrows
-- Releases the held reservations of a run made by one attempt (call_index: that call only; NULL:
-- every call) or, with earlier, by every attempt before it: their amounts go back to the run's
-- stripe of their budgets. A reservation is released at most once (only HELD ones change).
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
    SELECT s.budget_id FROM budget_stripes s
    WHERE s.tenant_id = sqlc.arg(tenant_id)::uuid AND s.budget_id IN (SELECT budget_id FROM freed)
      AND s.stripe = agentry_budget_stripe(sqlc.arg(run_id)::uuid)
    ORDER BY s.budget_id
    FOR UPDATE
)
UPDATE budget_stripes s SET
    reserved_tokens = s.reserved_tokens - f.tokens,
    reserved_micros = s.reserved_micros - f.micros
FROM freed f
WHERE s.tenant_id = sqlc.arg(tenant_id)::uuid AND s.budget_id = f.budget_id AND s.stripe = agentry_budget_stripe(sqlc.arg(run_id)::uuid)
  AND s.budget_id IN (SELECT budget_id FROM locked);

-- name: ReservationReleaseDead :many
-- The sweeper (every tenant, in a system transaction): releases held reservations whose run is
-- gone, not RUNNING, run by a newer attempt, or whose lease or own deadline expired. A
-- reservation younger than 30 s is left alone: the statement's view of the run may predate the
-- attempt that just made it. Each is released exactly once (status HELD -> RELEASED under its
-- row lock); their amounts go back to their run's stripe of their budgets.
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
    SELECT res.tenant_id, f.budget_id, agentry_budget_stripe(res.run_id) AS stripe,
           sum(res.reserved_tokens) AS tokens, sum(res.reserved_micros) AS micros
    FROM res, unnest(res.budget_ids) AS f(budget_id)
    GROUP BY res.tenant_id, f.budget_id, agentry_budget_stripe(res.run_id)
), locked AS (
    SELECT s.tenant_id, s.budget_id, s.stripe FROM budget_stripes s
    JOIN freed f ON f.tenant_id = s.tenant_id AND f.budget_id = s.budget_id AND f.stripe = s.stripe
    ORDER BY s.budget_id, s.stripe
    FOR UPDATE OF s
), upd AS (
    UPDATE budget_stripes s SET
        reserved_tokens = s.reserved_tokens - f.tokens,
        reserved_micros = s.reserved_micros - f.micros
    FROM freed f
    JOIN locked l ON l.tenant_id = f.tenant_id AND l.budget_id = f.budget_id AND l.stripe = f.stripe
    WHERE s.tenant_id = f.tenant_id AND s.budget_id = f.budget_id AND s.stripe = f.stripe
    RETURNING s.budget_id
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
