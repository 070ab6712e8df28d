-- name: TaskProjectLock :one
-- Locks a project for task creation (slugs are assigned under it). NO KEY UPDATE leaves
-- foreign-key checks of other rows that reference the project unblocked.
SELECT * FROM projects WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE;

-- name: TaskSlugsLike :many
-- The project's slugs that are base or base-<anything> (base holds only a-z, 0-9 and dashes).
SELECT slug FROM tasks
WHERE tenant_id = $1 AND project_id = $2 AND (slug = sqlc.arg(base)::text OR slug LIKE sqlc.arg(base)::text || '-%');

-- name: TaskInsert :one
INSERT INTO tasks (tenant_id, id, project_id, title, description, acceptance_criteria, tags, source, status, priority, type, slug, complexity, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING *;

-- name: TaskGet :one
SELECT * FROM tasks WHERE tenant_id = $1 AND id = $2;

-- name: TaskListByIDs :many
-- The tenant's tasks among ids (a batch for the GraphQL task loader).
SELECT * FROM tasks WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: TaskGetForUpdate :one
SELECT * FROM tasks WHERE tenant_id = $1 AND id = $2 FOR UPDATE;

-- name: TaskList :many
-- A project's tasks, newest first, after a cursor (uuid.Nil: from the start).
SELECT * FROM tasks
WHERE tenant_id = $1 AND project_id = $2
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR id < sqlc.arg(after)::uuid)
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: TaskUpdate :one
-- Changes the fields that are given (NULL: unchanged). Description and acceptance criteria are
-- cleared with an empty string.
UPDATE tasks SET
    title = coalesce(sqlc.narg(title), title),
    description = CASE WHEN sqlc.narg(description)::text IS NULL THEN description ELSE nullif(sqlc.narg(description)::text, '') END,
    acceptance_criteria = CASE WHEN sqlc.narg(acceptance_criteria)::text IS NULL THEN acceptance_criteria ELSE nullif(sqlc.narg(acceptance_criteria)::text, '') END,
    tags = coalesce(sqlc.narg(tags)::text[], tags),
    status = coalesce(sqlc.narg(status)::text, status),
    priority = coalesce(sqlc.narg(priority), priority),
    type = coalesce(sqlc.narg(type), type),
    complexity = coalesce(sqlc.narg(complexity), complexity),
    updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: TaskSetStatus :one
UPDATE tasks SET status = sqlc.arg(status), updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: TaskActiveRun :one
-- The task's run that has not ended yet, if any.
SELECT * FROM runs
WHERE tenant_id = $1 AND task_id = $2 AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
ORDER BY id DESC
LIMIT 1;

-- name: TaskRunList :many
-- A task's runs, newest first, after a cursor.
SELECT * FROM runs
WHERE tenant_id = $1 AND task_id = $2
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR id < sqlc.arg(after)::uuid)
ORDER BY id DESC
LIMIT sqlc.arg(lim);
