-- +goose Up

-- Workspace retention: a periodic job prunes snapshots, file versions and journal
-- entries older than AGENTRY_WORKSPACE_RETENTION, then the blobs nothing refers to any more.

-- When a blob was last written (stored, or stored again by a write of the same content): the
-- pruner deletes only blobs unused since its cutoff, so a write reusing an old blob is never
-- raced by its deletion (the write refreshes used_at, locking the row, before it refers to it).
ALTER TABLE workspace_blobs ADD COLUMN used_at timestamptz NOT NULL DEFAULT now();
-- (System-scoped: row-level security is forced for the owner too.)
SELECT set_config('app.system', 'on', true);
UPDATE workspace_blobs SET used_at = created_at;

-- Pruning looks rows up by age within a tenant.
CREATE INDEX workspace_file_versions_age ON workspace_file_versions (tenant_id, created_at);
CREATE INDEX workspace_journal_age ON workspace_journal (tenant_id, created_at);
CREATE INDEX workspace_snapshots_age ON workspace_snapshots (tenant_id, created_at);

-- +goose Down
DROP INDEX workspace_snapshots_age;
DROP INDEX workspace_journal_age;
DROP INDEX workspace_file_versions_age;
ALTER TABLE workspace_blobs DROP COLUMN used_at;
