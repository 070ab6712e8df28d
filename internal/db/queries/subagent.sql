-- name: SubagentInsert :one
INSERT INTO subagents (tenant_id, id, parent_run_id, role, goal, status, priority, depth, max_turns, max_tokens, timeout_minutes, tools)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING *;

-- name: SubagentGet :one
SELECT * FROM subagents WHERE tenant_id = $1 AND id = $2;

-- name: SubagentGetForUpdate :one
SELECT * FROM subagents WHERE tenant_id = $1 AND id = $2 FOR UPDATE;

-- name: SubagentListByParent :many
SELECT * FROM subagents WHERE tenant_id = $1 AND parent_run_id = $2 ORDER BY id;

-- name: SubagentListByParents :many
SELECT * FROM subagents WHERE tenant_id = $1 AND parent_run_id = ANY(sqlc.arg(parent_ids)::uuid[]) ORDER BY id;

-- name: SubagentListByIDs :many
SELECT * FROM subagents WHERE tenant_id = $1 AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: SubagentAllowanceUsed :one
-- What a parent's children take of its token allowance: an ended child what it used, any other
-- its whole max_tokens (reserved until it ends).
SELECT coalesce(sum(CASE WHEN r.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
                         THEN r.input_tokens + r.output_tokens ELSE s.max_tokens END), 0)::bigint AS used
FROM subagents s JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.id
WHERE s.tenant_id = $1 AND s.parent_run_id = $2;

-- name: SubagentSetStatus :one
UPDATE subagents SET status = sqlc.arg(status)::text,
    started_at = CASE WHEN sqlc.arg(status)::text = 'RUNNING' THEN coalesce(started_at, now()) ELSE started_at END
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: SubagentFinish :one
UPDATE subagents SET status = sqlc.arg(status), result = sqlc.narg(result), error = sqlc.narg(error),
    failure_class = sqlc.narg(failure_class), finished_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: SubagentDispatchMark :one
-- The dispatcher gives a pending sub-agent its slot (the caller holds the run's row lock).
UPDATE subagents SET status = 'QUEUED', dispatched_at = now()
WHERE tenant_id = $1 AND id = $2 AND status = 'PENDING'
RETURNING *;

-- name: SubagentDispatchCandidates :many
-- The pending sub-agents that may start now (run in a system transaction under the dispatcher's
-- lock): at most parent_max - running under each parent and the tenant's plan's
-- subagents_running_max (tenant_max when the plan is missing) - running in each tenant, each in priority order then age, the tenants interleaved round robin (each tenant's
-- first, then each one's second, ...; the tenant served least recently first). The caller stops
-- at the platform's free slots.
WITH active AS (
    SELECT a.tenant_id, a.parent_run_id, count(*) AS n
    FROM subagents a JOIN runs r ON r.tenant_id = a.tenant_id AND r.id = a.id
    WHERE a.status IN ('QUEUED', 'RUNNING') AND r.status <> 'WAITING'
    GROUP BY a.tenant_id, a.parent_run_id
), tenant_active AS (
    SELECT tenant_id, sum(n)::bigint AS n FROM active GROUP BY tenant_id
), last_served AS (
    SELECT tenant_id, max(dispatched_at) AS at FROM subagents WHERE dispatched_at IS NOT NULL
    AND status IN ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT') GROUP BY tenant_id
), by_parent AS (
    SELECT s.tenant_id, s.id, s.parent_run_id, s.priority,
           row_number() OVER (PARTITION BY s.tenant_id, s.parent_run_id ORDER BY s.priority, s.id) AS parent_rank
    FROM subagents s
    WHERE s.status = 'PENDING'
), fit AS (
    SELECT b.*, row_number() OVER (PARTITION BY b.tenant_id ORDER BY b.priority, b.id) AS tenant_rank
    FROM by_parent b LEFT JOIN active a ON a.tenant_id = b.tenant_id AND a.parent_run_id = b.parent_run_id
    WHERE b.parent_rank <= sqlc.arg(parent_max)::bigint - coalesce(a.n, 0)
)
SELECT f.tenant_id, f.id, f.parent_run_id, f.priority, f.tenant_rank
FROM fit f LEFT JOIN tenant_active t ON t.tenant_id = f.tenant_id LEFT JOIN last_served l ON l.tenant_id = f.tenant_id
LEFT JOIN tenants tn ON tn.id = f.tenant_id LEFT JOIN plans pl ON pl.name = tn.plan
WHERE f.tenant_rank <= coalesce(pl.subagents_running_max, sqlc.arg(tenant_max)::bigint) - coalesce(t.n, 0)
ORDER BY f.tenant_rank, l.at NULLS FIRST, f.tenant_id
LIMIT sqlc.arg(lim)::int;

-- name: SubagentPlatformActive :one
-- Sub-agents holding a slot: QUEUED or RUNNING, and not waiting for their own sub-agents.
SELECT count(*)::bigint FROM subagents a JOIN runs r ON r.tenant_id = a.tenant_id AND r.id = a.id
WHERE a.status IN ('QUEUED', 'RUNNING') AND r.status <> 'WAITING';

-- name: SubagentMarkReported :one
-- Claims the report of a sub-agent's end on its parent's stream (once).
UPDATE subagents SET end_reported = true
WHERE tenant_id = $1 AND id = $2 AND NOT end_reported
RETURNING *;

-- name: SubagentWaitOpen :one
-- How many of the children a waiting parent waits for have not ended.
SELECT count(*)::bigint FROM runs
WHERE tenant_id = $1 AND parent_run_id = $2 AND id = ANY(sqlc.arg(ids)::uuid[])
  AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT');

-- name: RunSuspendWaiting :one
-- Parks a running run WAITING for its children (wait_for) until wait_until at the latest: its
-- job ends and the lease is released.
UPDATE runs SET status = 'WAITING', wait_for = sqlc.arg(wait_for)::uuid[], wait_until = sqlc.arg(wait_until)::timestamptz,
    lease_owner = NULL, lease_expires_at = NULL, job_id = NULL
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'RUNNING'
RETURNING *;

-- name: RunClearWait :exec
UPDATE runs SET wait_for = NULL, wait_until = NULL WHERE tenant_id = $1 AND id = $2;

-- name: RunDescendantsForUpdate :many
-- Every descendant of a run, deepest first: a cascade locks them before the run itself, the
-- order in which a child's own end locks its parent.
WITH RECURSIVE tree AS (
    SELECT c.id FROM runs c WHERE c.tenant_id = sqlc.arg(tenant_id)::uuid AND c.parent_run_id = sqlc.arg(id)::uuid
    UNION ALL
    SELECT c.id FROM runs c JOIN tree ON c.tenant_id = sqlc.arg(tenant_id)::uuid AND c.parent_run_id = tree.id
)
SELECT r.* FROM runs r JOIN tree ON r.id = tree.id
WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid
ORDER BY r.depth DESC, r.id
FOR NO KEY UPDATE OF r;

-- name: ConversationDescendantsForUpdate :many
-- Locks the conversations of every descendant of a run, shallowest first, in id order within a
-- depth: a cascade locks them before any run (conversations first, then runs), in one order
-- whatever subtree it starts from.
WITH RECURSIVE tree AS (
    SELECT c.id, c.conversation_id, c.depth FROM runs c WHERE c.tenant_id = sqlc.arg(tenant_id)::uuid AND c.parent_run_id = sqlc.arg(id)::uuid
    UNION ALL
    SELECT c.id, c.conversation_id, c.depth FROM runs c JOIN tree ON c.tenant_id = sqlc.arg(tenant_id)::uuid AND c.parent_run_id = tree.id
)
SELECT cv.id FROM conversations cv JOIN tree ON cv.id = tree.conversation_id
WHERE cv.tenant_id = sqlc.arg(tenant_id)::uuid
ORDER BY tree.depth, cv.id
FOR NO KEY UPDATE OF cv;

-- name: RunGetForUpdateSkipLocked :one
SELECT * FROM runs WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE SKIP LOCKED;

-- name: SubagentOrphans :many
-- Sub-agents that have not ended under a parent that has (the parent completed or failed
-- without waiting for them): the dispatcher cancels them.
SELECT s.tenant_id, s.id FROM subagents s JOIN runs p ON p.tenant_id = s.tenant_id AND p.id = s.parent_run_id
WHERE s.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
  AND p.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
LIMIT 100;

-- name: SubagentDispatchLock :exec
-- The dispatcher's lock: one pass at a time across every process, so the counts it decides on
-- do not change under it (held until the pass commits).
SELECT pg_advisory_xact_lock(7215830264017731);

-- name: SubagentApproved :one
-- A person approved a sub-agent that waited for it: PENDING, the dispatcher's to start.
UPDATE subagents SET status = 'PENDING'
WHERE tenant_id = $1 AND id = $2 AND status = 'AWAITING_APPROVAL'
RETURNING *;

-- name: SubagentRequeue :one
-- A sub-agent that waited for its own sub-agents is workable again: it asks the dispatcher for a
-- slot again (PENDING; its run is QUEUED without a job).
UPDATE subagents SET status = 'PENDING'
WHERE tenant_id = $1 AND id = $2 AND status IN ('QUEUED', 'RUNNING')
RETURNING *;

-- name: RunTreeUsageByIDs :many
-- The usage of each of several runs of a tenant with its descendants' (the sum of their usage
-- records; a team run's phases' runs, linked through team_phases, count as its descendants): the
-- Run.total* fields of a page of runs, in one query.
WITH RECURSIVE tree AS (
    SELECT r.id AS root, r.id FROM runs r WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = ANY(sqlc.arg(ids)::uuid[])
    UNION ALL
    SELECT t.run_id, p.run_id FROM team_phases p JOIN team_runs t ON t.tenant_id = p.tenant_id AND t.id = p.team_run_id
    WHERE t.tenant_id = sqlc.arg(tenant_id)::uuid AND t.run_id = ANY(sqlc.arg(ids)::uuid[])
    UNION ALL
    SELECT tree.root, c.id FROM runs c JOIN tree ON c.tenant_id = sqlc.arg(tenant_id)::uuid AND c.parent_run_id = tree.id
)
SELECT tree.root::uuid AS run_id, coalesce(sum(u.input_tokens), 0)::bigint AS input_tokens,
       coalesce(sum(u.output_tokens), 0)::bigint AS output_tokens, coalesce(sum(u.cost_micros), 0)::bigint AS cost_micros
FROM tree LEFT JOIN usage_records u ON u.tenant_id = sqlc.arg(tenant_id)::uuid AND u.run_id = tree.id
GROUP BY tree.root;
