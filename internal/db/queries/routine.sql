-- name: RoleInsert :one
INSERT INTO roles (tenant_id, id, name, color, system_prompt, developer_prompt, model, templates, tools)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING *;

-- name: RoleUpdate :one
UPDATE roles SET name = $3, color = $4, system_prompt = $5, developer_prompt = $6, model = $7,
    templates = $8, tools = $9, updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: RoleGet :one
SELECT * FROM roles WHERE tenant_id = $1 AND id = $2;

-- name: RoleList :many
SELECT * FROM roles WHERE tenant_id = $1 ORDER BY name;

-- name: RoleColors :many
-- The colours the tenant's roles use (a new role takes the palette's farthest from them).
SELECT color FROM roles WHERE tenant_id = $1;

-- name: RoleDelete :execrows
DELETE FROM roles WHERE tenant_id = $1 AND id = $2;

-- name: RoleLockTenant :exec
-- Serialises colour assignment in a tenant.
SELECT pg_advisory_xact_lock(hashtextextended('roles:' || sqlc.arg(tenant_id)::uuid::text, 0));

-- name: RoleUsedBy :many
-- The routines whose steps name the role.
SELECT name FROM routines
WHERE tenant_id = $1 AND jsonb_path_exists(steps, '$[*] ? (@.roleId == $id)', jsonb_build_object('id', sqlc.arg(role_id)::uuid::text));

-- name: RoutineInsert :one
INSERT INTO routines (tenant_id, id, project_id, name, description, trigger, cron, timezone, active, max_retries, steps, edges, next_fire_at, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING *;

-- name: RoutineUpdate :one
UPDATE routines SET project_id = $3, name = $4, description = $5, trigger = $6, cron = $7, timezone = $8,
    active = $9, max_retries = $10, steps = $11, edges = $12, next_fire_at = $13, updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: RoutineGet :one
SELECT * FROM routines WHERE tenant_id = $1 AND id = $2;

-- name: RoutineList :many
-- The tenant's routines (of one project when project_id is given), by name.
SELECT * FROM routines
WHERE tenant_id = $1 AND (sqlc.narg(project_id)::uuid IS NULL OR project_id = sqlc.narg(project_id)::uuid)
ORDER BY name;

-- name: RoutineDelete :execrows
DELETE FROM routines WHERE tenant_id = $1 AND id = $2;

-- name: RoutineListTaskReady :many
-- The active TASK_READY routines of a project.
SELECT * FROM routines WHERE tenant_id = $1 AND project_id = $2 AND trigger = 'TASK_READY' AND active ORDER BY id;

-- name: RoutineListDue :many
-- Active CRON routines of every tenant whose next tick has come (the scheduler; system scope).
SELECT tenant_id, id, next_fire_at::timestamptz AS next_fire_at FROM routines
WHERE trigger = 'CRON' AND active AND next_fire_at <= sqlc.arg(now)::timestamptz
ORDER BY next_fire_at
LIMIT 500;

-- name: RoutineSetNextFire :exec
-- Moves the next tick on from the tick that fired (only forward: schedulers may race).
UPDATE routines SET next_fire_at = sqlc.arg(next_fire_at)::timestamptz
WHERE tenant_id = $1 AND id = $2 AND next_fire_at = sqlc.arg(fired)::timestamptz;

-- name: RoutineRunInsert :one
-- A run of kind ROUTINE (no conversation: its steps' runs have theirs).
INSERT INTO runs (tenant_id, id, user_id, kind, status, task_id, max_attempts)
VALUES ($1, $2, $3, 'ROUTINE', 'QUEUED', $4, 1)
RETURNING *;

-- name: RoutineRunStateInsert :one
INSERT INTO routine_runs (tenant_id, run_id, routine_id, definition, context, cron_tick)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: RoutineRunStateGet :one
SELECT * FROM routine_runs WHERE tenant_id = $1 AND run_id = $2;

-- name: RoutineRunStateGetForUpdate :one
SELECT * FROM routine_runs WHERE tenant_id = $1 AND run_id = $2 FOR UPDATE;

-- name: RoutineRunStateSave :exec
UPDATE routine_runs SET context = $3, current_step = $4, execution = $5, evaluation = $6, step_started_at = $7,
    phase = $8, phase_start = $9, retries = $10, executions = $11, updated_at = now()
WHERE tenant_id = $1 AND run_id = $2;

-- name: RoutineRunStart :one
-- The routine run starts (QUEUED -> RUNNING); its worker is the routine's own job.
UPDATE runs SET status = 'RUNNING', started_at = coalesce(started_at, now())
WHERE tenant_id = $1 AND id = $2 AND status = 'QUEUED'
RETURNING *;

-- name: RoutineRunForUpdate :one
SELECT * FROM runs WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE;

-- name: RoutineStepRunInsertLink :exec
INSERT INTO routine_step_runs (tenant_id, step_run_id, routine_run_id, step_key, step_type, execution, evaluation)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: RoutineStepRunGet :one
-- The run of a step execution (or cron evaluation).
SELECT r.* FROM routine_step_runs s JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.step_run_id
WHERE s.tenant_id = $1 AND s.routine_run_id = $2 AND s.step_key = $3 AND s.execution = $4 AND s.evaluation = $5;

-- name: RoutineStepRunByRun :one
-- The routine run a step run belongs to.
SELECT * FROM routine_step_runs WHERE tenant_id = $1 AND step_run_id = $2;

-- name: RoutineStepRunsActive :many
-- The step runs of a routine run that have not ended.
SELECT r.* FROM routine_step_runs s JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.step_run_id
WHERE s.tenant_id = $1 AND s.routine_run_id = $2 AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT');

-- name: RoutineStepRunsTokens :one
-- Tokens of the runs of a step execution (its cron evaluations together).
SELECT coalesce(sum(r.input_tokens), 0)::bigint AS input_tokens, coalesce(sum(r.output_tokens), 0)::bigint AS output_tokens
FROM routine_step_runs s JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.step_run_id
WHERE s.tenant_id = $1 AND s.routine_run_id = $2 AND s.step_key = $3 AND s.execution = $4;

-- name: RoutineStepResultInsert :one
INSERT INTO routine_step_results (tenant_id, run_id, step_key, execution, step_name, step_type, role_id, passed, output, data, input_tokens, output_tokens, duration_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: RoutineStepResultList :many
SELECT * FROM routine_step_results WHERE tenant_id = $1 AND run_id = $2 ORDER BY created_at, step_key, execution;

-- name: RoutineLastToolCall :one
-- The newest completed call of a tool in a run (a gate's verdict, a cron step's signal).
SELECT * FROM tool_calls WHERE tenant_id = $1 AND run_id = $2 AND name = $3 AND status = 'COMPLETED'
ORDER BY created_at DESC LIMIT 1;

-- name: RoutineRunList :many
-- A routine's runs, newest first.
SELECT r.* FROM routine_runs s JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.run_id
WHERE s.tenant_id = $1 AND s.routine_id = $2
ORDER BY s.run_id DESC
LIMIT sqlc.arg(lim);
