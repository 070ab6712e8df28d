-- name: PlanList :many
-- Every plan (platform-wide: plans belong to no tenant).
SELECT * FROM plans ORDER BY name;

-- name: PlanGet :one
SELECT * FROM plans WHERE name = $1;

-- name: PlanGetByTenant :one
-- The plan of the transaction's tenant.
SELECT p.* FROM tenants t JOIN plans p ON p.name = t.plan WHERE t.id = $1;

-- name: PlanUpsert :one
-- Creates a plan or changes its sub-agent limit. A new plan's spend limits are the columns'
-- defaults (migrations/00029_plan_spend_limits.sql, the only place they are written);
-- PlanSetSpend then changes the ones the caller gave.
INSERT INTO plans (name, subagents_running_max)
VALUES (sqlc.arg(name), sqlc.arg(subagents_running_max))
ON CONFLICT (name) DO UPDATE SET subagents_running_max = EXCLUDED.subagents_running_max, updated_at = now()
RETURNING *;

-- name: PlanSetSpend :one
-- Changes a plan's spend limits; one left NULL keeps the plan's.
UPDATE plans SET spend_rate = coalesce(sqlc.narg(spend_rate)::integer, spend_rate),
    spend_burst = coalesce(sqlc.narg(spend_burst)::integer, spend_burst), updated_at = now()
WHERE name = sqlc.arg(name)
RETURNING *;

-- name: TenantSetPlan :one
-- Puts a tenant on a plan (system transaction: a platform admin acts on any tenant).
UPDATE tenants SET plan = $2 WHERE id = $1
RETURNING *;
