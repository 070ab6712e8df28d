-- Workspace files: text files per (tenant, project, path). Paths reach these queries already
-- normalised by internal/workspace; prefixes are '' (the whole workspace) or a normalised path
-- naming a directory or file. Listings sort by byte order (COLLATE "C"), whatever the database
-- collation.

-- name: WorkspaceFileGet :one
SELECT * FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2 AND path = $3;

-- name: WorkspaceFileGetForUpdate :one
-- The file, locked until the transaction ends (read-modify-write: edits).
SELECT * FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2 AND path = $3
FOR UPDATE;

-- name: WorkspaceFileUpdate :one
-- Replaces an existing file's content and bumps its version; no row when the file does not exist.
UPDATE workspace_files
SET content = sqlc.arg(content), size = sqlc.arg(size), sha256 = sqlc.arg(sha256),
    version = version + 1, updated_at = now()
WHERE tenant_id = $1 AND project_id = $2 AND path = $3
RETURNING version;

-- name: WorkspaceFileUpsert :one
-- Creates a file at version 1 or, when it exists, replaces its content and bumps its version.
INSERT INTO workspace_files (tenant_id, project_id, path, content, size, sha256)
VALUES ($1, $2, $3, sqlc.arg(content), sqlc.arg(size), sqlc.arg(sha256))
ON CONFLICT (tenant_id, project_id, path) DO UPDATE
SET content = excluded.content, size = excluded.size, sha256 = excluded.sha256,
    version = workspace_files.version + 1, updated_at = now()
RETURNING version;

-- name: WorkspaceFileDelete :execrows
DELETE FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2 AND path = $3;

-- name: WorkspaceFileCount :one
SELECT count(*) FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2;

-- name: WorkspaceLock :one
-- Locks the project's row until the transaction ends, so that file creations in one workspace
-- are serialised (the file-count limit holds under concurrency). NO KEY UPDATE does not block
-- other tables' foreign-key checks against the project. No row: the project does not exist
-- (or is another tenant's).
SELECT id FROM projects
WHERE tenant_id = $1 AND id = $2
FOR NO KEY UPDATE;

-- name: WorkspaceFileList :many
-- Files at or under prefix (empty: every file), in path order, at most lim.
SELECT path, size, version, updated_at FROM workspace_files
WHERE tenant_id = $1 AND project_id = $2
  AND (sqlc.arg(prefix)::text = ''
       OR path = sqlc.arg(prefix)::text
       OR starts_with(path, sqlc.arg(prefix)::text || '/'))
ORDER BY path COLLATE "C"
LIMIT sqlc.arg(lim);

-- name: WorkspaceFileSearch :many
-- Lines containing query (literal, case-sensitive; query holds no newline) in the files at or
-- under prefix, in path and line order, at most lim. Only the first max_files matching files
-- are split into lines, which bounds the work. Each line comes back as a window of at most
-- width characters starting a little before the first match (start_col, 1-based), with the
-- line's full length so that the caller can mark what was cut.
SELECT f.path,
       l.n::integer AS line_no,
       greatest(1, strpos(l.line, sqlc.arg(query)::text) - sqlc.arg(lead)::integer)::integer AS start_col,
       length(l.line)::integer AS line_len,
       substr(l.line, greatest(1, strpos(l.line, sqlc.arg(query)::text) - sqlc.arg(lead)::integer),
              sqlc.arg(width)::integer)::text AS snippet
FROM (
    SELECT wf.path, wf.content FROM workspace_files wf
    WHERE wf.tenant_id = $1 AND wf.project_id = $2
      AND (sqlc.arg(prefix)::text = ''
           OR wf.path = sqlc.arg(prefix)::text
           OR starts_with(wf.path, sqlc.arg(prefix)::text || '/'))
      AND strpos(wf.content, sqlc.arg(query)::text) > 0
    ORDER BY wf.path COLLATE "C"
    LIMIT sqlc.arg(max_files)
) f
CROSS JOIN LATERAL unnest(string_to_array(f.content, E'\n')) WITH ORDINALITY AS l(line, n)
WHERE strpos(l.line, sqlc.arg(query)::text) > 0
ORDER BY f.path COLLATE "C", l.n
LIMIT sqlc.arg(lim);
