-- name: PlanList :many
-- Every plan (platform-wide: plans belong to no tenant).
SELECT * FROM plans ORDER BY name;

-- name: PlanGet :one
SELECT * FROM plans WHERE name = $1;

-- name: PlanGetByTenant :one
-- The plan of the transaction's tenant.
SELECT p.* FROM tenants t JOIN plans p ON p.name = t.plan WHERE t.id = $1;

-- name: PlanUpsert :one
-- Creates a plan or changes its limits; a spend limit left NULL keeps the plan's (a new plan
-- gets the columns' defaults, 10 and 20).
INSERT INTO plans (name, subagents_running_max, spend_rate, spend_burst)
VALUES (sqlc.arg(name), sqlc.arg(subagents_running_max), coalesce(sqlc.narg(spend_rate)::integer, 10), coalesce(sqlc.narg(spend_burst)::integer, 20))
ON CONFLICT (name) DO UPDATE SET subagents_running_max = EXCLUDED.subagents_running_max,
    spend_rate = coalesce(sqlc.narg(spend_rate)::integer, plans.spend_rate),
    spend_burst = coalesce(sqlc.narg(spend_burst)::integer, plans.spend_burst), updated_at = now()
RETURNING *;

-- name: TenantSetPlan :one
-- Puts a tenant on a plan (system transaction: a platform admin acts on any tenant).
UPDATE tenants SET plan = $2 WHERE id = $1
RETURNING *;
