-- name: ApprovalInsert :one
INSERT INTO approvals (tenant_id, id, run_id, tool_call_id, kind, tool_name, args_hash, question, data, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING *;

-- name: ApprovalGet :one
SELECT * FROM approvals WHERE tenant_id = $1 AND id = $2;

-- name: ApprovalGetForUpdate :one
SELECT * FROM approvals WHERE tenant_id = $1 AND id = $2 FOR UPDATE;

-- name: ApprovalListByRun :many
SELECT * FROM approvals WHERE tenant_id = $1 AND run_id = $2 ORDER BY created_at, id;

-- name: ApprovalListByRuns :many
-- The approvals of the tenant's runs among run_ids, each run's oldest first.
SELECT * FROM approvals WHERE tenant_id = sqlc.arg(tenant_id) AND run_id = ANY(sqlc.arg(run_ids)::uuid[])
ORDER BY run_id, created_at, id;

-- name: ApprovalLatestByToolCall :one
-- The newest approval asked about a tool call.
SELECT * FROM approvals WHERE tenant_id = $1 AND tool_call_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1;

-- name: ApprovalLatestByRun :one
-- The newest approval of a kind asked by a run.
SELECT * FROM approvals WHERE tenant_id = $1 AND run_id = $2 AND kind = $3 ORDER BY created_at DESC, id DESC LIMIT 1;

-- name: ApprovalDecide :one
-- Moves a pending approval to its outcome (APPROVED, REJECTED or EXPIRED); a decided one is
-- left alone (no row).
UPDATE approvals SET
    status = sqlc.arg(status),
    decided_at = sqlc.arg(decided_at)::timestamptz,
    decided_by = sqlc.narg(decided_by)::uuid,
    note = sqlc.narg(note)::text
WHERE tenant_id = $1 AND id = $2 AND status = 'PENDING'
RETURNING *;

-- name: ApprovalListDue :many
-- Pending approvals whose deadline passed (system transaction: every tenant), oldest first.
SELECT tenant_id, id FROM approvals
WHERE status = 'PENDING' AND expires_at <= sqlc.arg(now)::timestamptz
ORDER BY expires_at
LIMIT sqlc.arg(lim);

-- name: ApprovalGetToolCall :one
-- The tool call an approval asks about.
SELECT * FROM tool_calls WHERE tenant_id = $1 AND id = $2;

-- name: ApprovalListPage :many
-- The tenant's approvals, newest first, of any status or of one; only those of user_id's runs
-- when it is given.
SELECT a.* FROM approvals a
JOIN runs r ON r.tenant_id = a.tenant_id AND r.id = a.run_id
WHERE a.tenant_id = $1
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR a.id < sqlc.arg(after)::uuid)
  AND (sqlc.narg(status)::text IS NULL OR a.status = sqlc.narg(status)::text)
  AND (sqlc.narg(user_id)::uuid IS NULL OR r.user_id = sqlc.narg(user_id)::uuid)
ORDER BY a.id DESC
LIMIT sqlc.arg(lim);

-- name: ApprovalCountPending :one
-- Approvals waiting for a decision across every tenant (the approvals-waiting gauge).
SELECT count(*) FROM approvals WHERE status = 'PENDING';
