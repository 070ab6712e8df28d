-- name: PlanList :many
-- Every plan (platform-wide: plans belong to no tenant).
SELECT * FROM plans ORDER BY name;

-- name: PlanGet :one
SELECT * FROM plans WHERE name = $1;

-- name: PlanUpsert :one
-- Creates a plan or changes its limits.
INSERT INTO plans (name, subagents_running_max) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET subagents_running_max = EXCLUDED.subagents_running_max, updated_at = now()
RETURNING *;

-- name: TenantSetPlan :one
-- Puts a tenant on a plan (system transaction: a platform admin acts on any tenant).
UPDATE tenants SET plan = $2 WHERE id = $1
RETURNING *;
