-- Workspace history: blobs, file versions, snapshots (manifests) and the run operation journal.

-- name: WorkspaceBlobPut :exec
INSERT INTO workspace_blobs (tenant_id, sha256, content, size)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, sha256) DO NOTHING;

-- name: WorkspaceBlobGet :one
SELECT content FROM workspace_blobs WHERE tenant_id = $1 AND sha256 = $2;

-- name: WorkspaceBlobCount :one
SELECT count(*) FROM workspace_blobs WHERE tenant_id = $1;

-- name: WorkspaceVersionMax :one
SELECT coalesce(max(version), 0)::integer FROM workspace_file_versions
WHERE tenant_id = $1 AND project_id = $2 AND path = $3;

-- name: WorkspaceVersionInsert :exec
INSERT INTO workspace_file_versions (tenant_id, project_id, path, version, sha256, run_id, tool_call_id)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: WorkspaceVersionList :many
SELECT v.version, v.sha256, coalesce(b.size, 0)::integer AS size, v.run_id, v.tool_call_id, v.created_at
FROM workspace_file_versions v
LEFT JOIN workspace_blobs b ON b.tenant_id = v.tenant_id AND b.sha256 = v.sha256
WHERE v.tenant_id = $1 AND v.project_id = $2 AND v.path = $3
ORDER BY v.version;

-- name: WorkspaceVersionGet :one
SELECT v.version, v.sha256, coalesce(b.content, '')::text AS content
FROM workspace_file_versions v
LEFT JOIN workspace_blobs b ON b.tenant_id = v.tenant_id AND b.sha256 = v.sha256
WHERE v.tenant_id = $1 AND v.project_id = $2 AND v.path = $3 AND v.version = $4;

-- name: WorkspaceFileSetVersion :exec
UPDATE workspace_files SET version = $4
WHERE tenant_id = $1 AND project_id = $2 AND path = $3;

-- name: WorkspaceFileShaGet :one
-- The current blob of a file, locked until the transaction ends.
SELECT sha256 FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2 AND path = $3
FOR UPDATE;

-- name: WorkspaceFileShas :many
-- Every file of a project with its blob, in path order.
SELECT path, sha256 FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2
ORDER BY path COLLATE "C";

-- name: WorkspaceSnapshotInsert :one
INSERT INTO workspace_snapshots (tenant_id, id, project_id, kind, label, run_id, state)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING *;

-- name: WorkspaceSnapshotFill :execrows
-- The manifest of a new snapshot: the project's files as they are now.
INSERT INTO workspace_snapshot_entries (tenant_id, snapshot_id, path, sha256)
SELECT f.tenant_id, sqlc.arg(snapshot_id)::uuid, f.path, f.sha256
FROM workspace_files f
WHERE f.tenant_id = $1 AND f.project_id = sqlc.arg(project_id)::uuid;

-- name: WorkspaceSnapshotGet :one
SELECT * FROM workspace_snapshots WHERE tenant_id = $1 AND id = $2;

-- name: WorkspaceSnapshotByRun :one
SELECT * FROM workspace_snapshots WHERE tenant_id = $1 AND run_id = $2;

-- name: WorkspaceSnapshotList :many
SELECT * FROM workspace_snapshots WHERE tenant_id = $1 AND project_id = $2
ORDER BY created_at DESC, id;

-- name: WorkspaceSnapshotSetState :one
UPDATE workspace_snapshots SET state = $3
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: WorkspaceSnapshotEntries :many
SELECT path, sha256 FROM workspace_snapshot_entries
WHERE tenant_id = $1 AND snapshot_id = $2
ORDER BY path COLLATE "C";

-- name: WorkspaceJournalInsert :exec
INSERT INTO workspace_journal (tenant_id, project_id, run_id, tool_call_id, op, path, before_sha, after_sha)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: WorkspaceJournalByRun :many
-- A run's operations, oldest first.
SELECT * FROM workspace_journal WHERE tenant_id = $1 AND run_id = $2 ORDER BY id;

-- name: WorkspaceRunApprovalsClose :execrows
-- Expires what a run that just ended still had pending (a question it can no longer act on),
-- so that its rollback question may be asked.
UPDATE approvals SET status = 'EXPIRED', decided_at = now()
WHERE tenant_id = $1 AND run_id = $2 AND status = 'PENDING';

