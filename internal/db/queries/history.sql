-- Workspace history: blobs, file versions, snapshots (manifests) and the run operation journal.

-- name: WorkspaceBlobPut :exec
-- Stores a content once per tenant. Storing it again refreshes used_at, and locks the row
-- until the transaction ends, so the retention job cannot delete it under the write.
INSERT INTO workspace_blobs (tenant_id, sha256, content, size)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, sha256) DO UPDATE SET used_at = now();

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


-- Retention (the workspace_prune job): history older than a cutoff goes, except what a run
-- awaiting a decision needs, the latest version of every path, and blobs anything refers to.

-- name: WorkspacePruneTenants :many
-- Tenants holding workspace history older than cutoff (system transaction: every tenant).
SELECT t.id FROM tenants t
WHERE EXISTS (SELECT 1 FROM workspace_file_versions v WHERE v.tenant_id = t.id AND v.created_at < sqlc.arg(cutoff))
   OR EXISTS (SELECT 1 FROM workspace_snapshots s WHERE s.tenant_id = t.id AND s.created_at < sqlc.arg(cutoff))
   OR EXISTS (SELECT 1 FROM workspace_journal j WHERE j.tenant_id = t.id AND j.created_at < sqlc.arg(cutoff))
   OR EXISTS (SELECT 1 FROM workspace_blobs b WHERE b.tenant_id = t.id AND b.used_at < sqlc.arg(cutoff))
ORDER BY t.id;

-- name: WorkspacePruneKeepRuns :many
-- Runs whose workspace history is kept whatever its age: runs that have not ended (they may
-- still change files, and end with a rollback question) and ended runs whose rollback question
-- waits for its answer.
SELECT r.id FROM runs r
WHERE r.tenant_id = $1 AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
UNION
SELECT a.run_id FROM approvals a
WHERE a.tenant_id = $1 AND a.kind = 'rollback' AND a.status = 'PENDING';

-- name: WorkspacePruneSnapshots :execrows
-- Snapshots (their manifests cascade) older than cutoff, except those of keep_runs.
DELETE FROM workspace_snapshots s
WHERE s.tenant_id = $1 AND s.created_at < sqlc.arg(cutoff)
  AND (s.run_id IS NULL OR NOT s.run_id = ANY(sqlc.arg(keep_runs)::uuid[]));

-- name: WorkspacePruneJournal :execrows
-- Journal entries older than cutoff, except those of keep_runs.
DELETE FROM workspace_journal j
WHERE j.tenant_id = $1 AND j.created_at < sqlc.arg(cutoff)
  AND NOT j.run_id = ANY(sqlc.arg(keep_runs)::uuid[]);

-- name: WorkspacePruneVersions :execrows
-- File versions older than cutoff, except those made by keep_runs and the latest version of
-- each path (the file's current version, or the deletion that ended it: numbering goes on
-- from it).
DELETE FROM workspace_file_versions v
WHERE v.tenant_id = $1 AND v.created_at < sqlc.arg(cutoff)
  AND (v.run_id IS NULL OR NOT v.run_id = ANY(sqlc.arg(keep_runs)::uuid[]))
  AND v.version < (SELECT max(w.version) FROM workspace_file_versions w
                   WHERE w.tenant_id = v.tenant_id AND w.project_id = v.project_id AND w.path = v.path);

-- name: WorkspacePruneBlobs :execrows
-- Blobs unused since cutoff that no file, version, snapshot or journal entry refers to.
DELETE FROM workspace_blobs b
WHERE b.tenant_id = $1 AND b.used_at < sqlc.arg(cutoff)
  AND NOT EXISTS (SELECT 1 FROM workspace_files f WHERE f.tenant_id = b.tenant_id AND f.sha256 = b.sha256)
  AND NOT EXISTS (SELECT 1 FROM workspace_file_versions v WHERE v.tenant_id = b.tenant_id AND v.sha256 = b.sha256)
  AND NOT EXISTS (SELECT 1 FROM workspace_snapshot_entries e WHERE e.tenant_id = b.tenant_id AND e.sha256 = b.sha256)
  AND NOT EXISTS (SELECT 1 FROM workspace_journal j
                  WHERE j.tenant_id = b.tenant_id AND (j.before_sha = b.sha256 OR j.after_sha = b.sha256));
