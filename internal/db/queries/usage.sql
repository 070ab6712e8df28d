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
-- The tenant's budgets with the counters of the current window (pending settlements included);
-- with user_id, only the tenant-wide ones and that user's.
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
-- The budgets applying to the user that have nothing left (spent + reserved >= limit, pending
-- settlements included): new runs are refused while there is one.
SELECT id, scope, period, token_limit, cost_limit_micros
FROM budget_totals
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND (scope = 'TENANT' OR user_id = sqlc.arg(user_id)::uuid)
  AND ((token_limit IS NOT NULL AND spent_tokens + reserved_tokens >= token_limit)
    OR (cost_limit_micros IS NOT NULL AND spent_micros + reserved_micros >= cost_limit_micros))
ORDER BY id;

-- name: BudgetReserve :one
-- Reserves a call's worst case on every budget applying to the user, all or nothing, in one
-- statement: the rows are locked in id order (no deadlock between concurrent reservers), the
-- pending settlements whose budgets are all locked here are folded in (each once: the update
-- of a settlement folded meanwhile finds it no longer pending), the verdict is taken over all
-- of them, and only when every one has room is the reservation added and stored (a released
-- reservation of the same call is reused). A pending settlement left pending (another user's,
-- on a budget of that user's not locked here) counts with its overage only: what it gives back
-- counts once it is folded. ok is false when a budget refused; budgets is how many applied;
-- reserved is 1 when a reservation was stored; others is how many pending settlements were
-- left pending (a refusal with others is worth retrying after folding them: FoldPending).
WITH locked AS (
    SELECT b.id, b.token_limit, b.cost_limit_micros, b.reserved_tokens, b.reserved_micros,
           agentry_period_start(b.period, now()) AS cur,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END AS eff_tokens,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END AS eff_micros
    FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
    ORDER BY b.id
    FOR UPDATE
), ids AS (
    SELECT coalesce(array_agg(l.id), '{}')::uuid[] AS ids FROM locked l
), folded AS (
    UPDATE reservations r SET pending = false
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.pending AND r.budget_ids <@ (SELECT ids FROM ids)
    RETURNING r.budget_ids, r.reserved_tokens, r.reserved_micros, r.actual_tokens, r.actual_micros, r.finished_at
), others AS (
    SELECT r.budget_ids,
           greatest(r.actual_tokens - r.reserved_tokens, 0) AS over_tokens,
           greatest(r.actual_micros - r.reserved_micros, 0) AS over_micros
    FROM reservations r
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.pending AND NOT r.budget_ids <@ (SELECT ids FROM ids)
), nxt AS (
    SELECT l.id, l.cur, l.token_limit, l.cost_limit_micros,
           l.eff_tokens + coalesce((SELECT sum(f.actual_tokens) FROM folded f WHERE l.id = ANY (f.budget_ids) AND f.finished_at >= l.cur), 0) AS spent_tokens,
           l.eff_micros + coalesce((SELECT sum(f.actual_micros) FROM folded f WHERE l.id = ANY (f.budget_ids) AND f.finished_at >= l.cur), 0) AS spent_micros,
           l.reserved_tokens - coalesce((SELECT sum(f.reserved_tokens) FROM folded f WHERE l.id = ANY (f.budget_ids)), 0) AS reserved_tokens,
           l.reserved_micros - coalesce((SELECT sum(f.reserved_micros) FROM folded f WHERE l.id = ANY (f.budget_ids)), 0) AS reserved_micros,
           coalesce((SELECT sum(o.over_tokens) FROM others o WHERE l.id = ANY (o.budget_ids)), 0) AS over_tokens,
           coalesce((SELECT sum(o.over_micros) FROM others o WHERE l.id = ANY (o.budget_ids)), 0) AS over_micros
    FROM locked l
), verdict AS (
    SELECT coalesce(bool_and(
               (n.token_limit IS NULL OR n.spent_tokens + n.reserved_tokens + n.over_tokens + sqlc.arg(tokens)::bigint <= n.token_limit)
           AND (n.cost_limit_micros IS NULL OR n.spent_micros + n.reserved_micros + n.over_micros + sqlc.arg(micros)::bigint <= n.cost_limit_micros)), true) AS ok,
           count(*) AS n
    FROM nxt n
), upd AS (
    UPDATE budgets b SET
        period_start = n.cur,
        spent_tokens = n.spent_tokens,
        spent_micros = n.spent_micros,
        reserved_tokens = n.reserved_tokens + CASE WHEN v.ok THEN sqlc.arg(tokens)::bigint ELSE 0 END,
        reserved_micros = n.reserved_micros + CASE WHEN v.ok THEN sqlc.arg(micros)::bigint ELSE 0 END,
        updated_at = now()
    FROM nxt n, verdict v
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = n.id AND (v.ok OR EXISTS (SELECT 1 FROM folded))
    RETURNING b.id, v.ok
), ins AS (
    INSERT INTO reservations (tenant_id, id, run_id, call_index, attempt, budget_ids, reserved_tokens, reserved_micros, expires_at)
    SELECT sqlc.arg(tenant_id)::uuid, sqlc.arg(id)::uuid, sqlc.arg(run_id)::uuid, sqlc.arg(call_index)::integer,
           sqlc.arg(attempt)::integer, array_agg(upd.id), sqlc.arg(tokens)::bigint, sqlc.arg(micros)::bigint, sqlc.arg(expires_at)::timestamptz
    FROM upd
    WHERE upd.ok
    HAVING count(*) > 0
    ON CONFLICT (tenant_id, run_id, call_index) DO UPDATE SET
        attempt = EXCLUDED.attempt, budget_ids = EXCLUDED.budget_ids,
        reserved_tokens = EXCLUDED.reserved_tokens, reserved_micros = EXCLUDED.reserved_micros,
        actual_tokens = NULL, actual_micros = NULL, status = 'HELD',
        created_at = now(), expires_at = EXCLUDED.expires_at, finished_at = NULL
    WHERE reservations.status = 'RELEASED'
    RETURNING id
)
SELECT v.ok::boolean AS ok, v.n::bigint AS budgets, (SELECT count(*) FROM ins)::bigint AS reserved,
       (SELECT count(*) FROM others)::bigint AS others
FROM verdict v;

-- name: BudgetRefuse :many
-- After a refused reservation (in its transaction, the rows still locked): the budgets that
-- have no room for it, marked exceeded for their window. notify is true the first time in the
-- window (one budget.exceeded event per window). Pending settlements count with their overage,
-- as in BudgetReserve.
WITH refusing AS (
    SELECT b.id, b.exceeded_start, agentry_period_start(b.period, now()) AS cur, o.over_tokens, o.over_micros
    FROM budgets b
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(greatest(r.actual_tokens - r.reserved_tokens, 0)), 0) AS over_tokens,
               coalesce(sum(greatest(r.actual_micros - r.reserved_micros, 0)), 0) AS over_micros
        FROM reservations r
        WHERE r.tenant_id = b.tenant_id AND r.pending AND b.id = ANY (r.budget_ids)
    ) o
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
      AND ((b.token_limit IS NOT NULL AND (CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END) + b.reserved_tokens + o.over_tokens + sqlc.arg(tokens)::bigint > b.token_limit)
        OR (b.cost_limit_micros IS NOT NULL AND (CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END) + b.reserved_micros + o.over_micros + sqlc.arg(micros)::bigint > b.cost_limit_micros))
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
-- Settles a call exactly once, in the transaction that stores its reply and usage record.
-- Nothing happens when the call was settled before. A held reservation becomes SETTLED and
-- pending, and no budget row is locked: the next reservation of the same budgets, or the
-- sweeper, folds it in (BudgetReserve, ReservationFold). Its budgets as they stand with it are
-- read, and a budget whose 80% / 100% mark this call crosses for the first time in the window
-- is marked (its row locked only then): warn / exceed. A call with nothing held (its
-- reservation was given back already, or it had none) adds its usage to every budget applying
-- to the user at once, marking the same way.
WITH res AS (
    SELECT r.id, r.status, r.budget_ids, r.reserved_tokens, r.reserved_micros
    FROM reservations r
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.run_id = sqlc.arg(run_id)::uuid AND r.call_index = sqlc.arg(call_index)::integer
    FOR UPDATE
), mark AS (
    UPDATE reservations r SET status = 'SETTLED', actual_tokens = sqlc.arg(tokens)::bigint, actual_micros = sqlc.arg(micros)::bigint,
        finished_at = now(), pending = (res.status = 'HELD')
    FROM res
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = res.id AND res.status <> 'SETTLED'
    RETURNING r.id
), locked AS (
    SELECT b.id, agentry_period_start(b.period, now()) AS cur, b.warned_start, b.exceeded_start,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END + sqlc.arg(tokens)::bigint AS new_tokens,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END + sqlc.arg(micros)::bigint AS new_micros
    FROM budgets b
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND (b.scope = 'TENANT' OR b.user_id = sqlc.arg(user_id)::uuid)
      AND NOT EXISTS (SELECT 1 FROM res WHERE res.status IN ('SETTLED', 'HELD'))
    ORDER BY b.id
    FOR UPDATE
), direct AS (
    UPDATE budgets b SET
        period_start = n.cur,
        spent_tokens = n.new_tokens,
        spent_micros = n.new_micros,
        warned_start = CASE WHEN (b.token_limit IS NOT NULL AND n.new_tokens * 5 >= b.token_limit * 4)
                              OR (b.cost_limit_micros IS NOT NULL AND n.new_micros * 5 >= b.cost_limit_micros * 4)
                            THEN n.cur ELSE b.warned_start END,
        exceeded_start = CASE WHEN (b.token_limit IS NOT NULL AND n.new_tokens >= b.token_limit)
                                OR (b.cost_limit_micros IS NOT NULL AND n.new_micros >= b.cost_limit_micros)
                              THEN n.cur ELSE b.exceeded_start END,
        updated_at = now()
    FROM locked n
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = n.id
    RETURNING b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
              b.spent_tokens, b.spent_micros, b.reserved_tokens, b.reserved_micros,
              (b.warned_start IS NOT DISTINCT FROM n.cur AND n.warned_start IS DISTINCT FROM n.cur) AS warn,
              (b.exceeded_start IS NOT DISTINCT FROM n.cur AND n.exceeded_start IS DISTINCT FROM n.cur) AS exceed
), totals AS (
    SELECT t.id, t.period_start AS cur,
           t.spent_tokens + sqlc.arg(tokens)::bigint AS new_tokens,
           t.spent_micros + sqlc.arg(micros)::bigint AS new_micros,
           t.reserved_tokens - res.reserved_tokens AS new_reserved_tokens,
           t.reserved_micros - res.reserved_micros AS new_reserved_micros,
           (t.token_limit IS NOT NULL AND (t.spent_tokens + sqlc.arg(tokens)::bigint) * 5 >= t.token_limit * 4)
        OR (t.cost_limit_micros IS NOT NULL AND (t.spent_micros + sqlc.arg(micros)::bigint) * 5 >= t.cost_limit_micros * 4) AS w80,
           (t.token_limit IS NOT NULL AND t.spent_tokens + sqlc.arg(tokens)::bigint >= t.token_limit)
        OR (t.cost_limit_micros IS NOT NULL AND t.spent_micros + sqlc.arg(micros)::bigint >= t.cost_limit_micros) AS w100
    FROM res
    JOIN budget_totals t ON t.tenant_id = sqlc.arg(tenant_id)::uuid AND t.id = ANY (res.budget_ids)
    WHERE res.status = 'HELD'
), crossing AS (
    SELECT b.id, b.warned_start, b.exceeded_start, c.cur, c.new_tokens, c.new_micros, c.new_reserved_tokens, c.new_reserved_micros, c.w80, c.w100
    FROM budgets b
    JOIN totals c ON b.id = c.id
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid
      AND ((c.w80 AND b.warned_start IS DISTINCT FROM c.cur) OR (c.w100 AND b.exceeded_start IS DISTINCT FROM c.cur))
    ORDER BY b.id
    FOR UPDATE OF b
), marked AS (
    UPDATE budgets b SET
        warned_start = CASE WHEN k.w80 THEN k.cur ELSE b.warned_start END,
        exceeded_start = CASE WHEN k.w100 THEN k.cur ELSE b.exceeded_start END
    FROM crossing k
    WHERE b.tenant_id = sqlc.arg(tenant_id)::uuid AND b.id = k.id
    RETURNING b.id, b.scope, b.user_id, b.period, b.token_limit, b.cost_limit_micros,
              k.new_tokens, k.new_micros, k.new_reserved_tokens, k.new_reserved_micros,
              (k.w80 AND k.warned_start IS DISTINCT FROM k.cur) AS warn,
              (k.w100 AND k.exceeded_start IS DISTINCT FROM k.cur) AS exceed
)
SELECT d.id, d.scope, d.user_id, d.period, d.token_limit, d.cost_limit_micros,
       d.spent_tokens::bigint AS spent_tokens, d.spent_micros::bigint AS spent_micros,
       d.reserved_tokens::bigint AS reserved_tokens, d.reserved_micros::bigint AS reserved_micros,
       d.warn::boolean AS warn, d.exceed::boolean AS exceed
FROM direct d
UNION ALL
SELECT m.id, m.scope, m.user_id, m.period, m.token_limit, m.cost_limit_micros,
       m.new_tokens, m.new_micros, m.new_reserved_tokens, m.new_reserved_micros, m.warn, m.exceed
FROM marked m;

-- name: ReservationFold :one
-- Folds pending settlements into their budgets (tenant_id: that tenant's only; NULL: every
-- tenant's, in a system transaction) that were settled before settled_before, at most lim:
-- the sweeper's, for users who made no call since, and a refused reservation's before it tries
-- again. The budgets are locked first, in id order as every reservation locks them, then each
-- settlement is folded once (one folded meanwhile is no longer pending when its update looks).
-- A settlement counts in spent only in the window it was made in; what it reserved is given
-- back whatever the window.
WITH cand AS (
    SELECT r.tenant_id, r.id, r.budget_ids
    FROM reservations r
    WHERE r.pending AND r.finished_at < sqlc.arg(settled_before)::timestamptz
      AND (sqlc.narg(tenant_id)::uuid IS NULL OR r.tenant_id = sqlc.narg(tenant_id)::uuid)
    ORDER BY r.finished_at
    LIMIT sqlc.arg(lim)
), locked AS (
    SELECT b.tenant_id, b.id, agentry_period_start(b.period, now()) AS cur,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_tokens END AS eff_tokens,
           CASE WHEN b.period_start < agentry_period_start(b.period, now()) THEN 0 ELSE b.spent_micros END AS eff_micros
    FROM budgets b
    WHERE (b.tenant_id, b.id) IN (SELECT c.tenant_id, x.id FROM cand c, unnest(c.budget_ids) AS x(id))
    ORDER BY b.id
    FOR UPDATE OF b
), folded AS (
    UPDATE reservations r SET pending = false
    FROM cand c
    WHERE r.tenant_id = c.tenant_id AND r.id = c.id AND r.pending AND (SELECT count(*) FROM locked) >= 0
    RETURNING r.tenant_id, r.budget_ids, r.reserved_tokens, r.reserved_micros, r.actual_tokens, r.actual_micros, r.finished_at
), per AS (
    SELECT l.tenant_id, l.id, l.cur, l.eff_tokens, l.eff_micros,
           coalesce(sum(f.actual_tokens) FILTER (WHERE f.finished_at >= l.cur), 0) AS add_tokens,
           coalesce(sum(f.actual_micros) FILTER (WHERE f.finished_at >= l.cur), 0) AS add_micros,
           sum(f.reserved_tokens) AS free_tokens, sum(f.reserved_micros) AS free_micros
    FROM locked l
    JOIN folded f ON f.tenant_id = l.tenant_id AND l.id = ANY (f.budget_ids)
    GROUP BY l.tenant_id, l.id, l.cur, l.eff_tokens, l.eff_micros
), upd AS (
    UPDATE budgets b SET
        period_start = p.cur,
        spent_tokens = p.eff_tokens + p.add_tokens,
        spent_micros = p.eff_micros + p.add_micros,
        reserved_tokens = b.reserved_tokens - p.free_tokens,
        reserved_micros = b.reserved_micros - p.free_micros,
        updated_at = now()
    FROM per p
    WHERE b.tenant_id = p.tenant_id AND b.id = p.id
    RETURNING b.id
)
SELECT count(*)::bigint AS folded FROM folded;

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
