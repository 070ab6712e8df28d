-- +goose Up

-- Workspace history. Contents are content-addressed blobs shared by versions and
-- snapshots of a tenant; a snapshot is a manifest (path -> blob), never a copy of contents.

-- A file content, stored once per tenant however many versions and snapshots name it.
CREATE TABLE workspace_blobs (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    sha256     bytea NOT NULL,
    content    text NOT NULL,
    size       integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, sha256)
);

-- Every state a file has had: a write or edit names its blob, a delete has none. version grows
-- per (project, path) across deletes and re-creations; workspace_files.version is the latest.
CREATE TABLE workspace_file_versions (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    project_id   uuid NOT NULL,
    path         text NOT NULL,
    version      integer NOT NULL,
    sha256       bytea,
    run_id       uuid,
    tool_call_id uuid,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, project_id, path, version),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, sha256) REFERENCES workspace_blobs (tenant_id, sha256)
);

-- A workspace snapshot: taken before a run's first change (run_id set), by hand (kind manual),
-- or before a restore (kind restore). state: open (a run's, undecided), committed (the run
-- succeeded), rolled_back, kept; manual and restore snapshots are committed.
CREATE TABLE workspace_snapshots (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    project_id uuid NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('run', 'manual', 'restore')),
    label      text,
    run_id     uuid,
    state      text NOT NULL CHECK (state IN ('open', 'committed', 'rolled_back', 'kept')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX workspace_snapshots_run ON workspace_snapshots (tenant_id, run_id) WHERE run_id IS NOT NULL;
CREATE INDEX workspace_snapshots_project ON workspace_snapshots (tenant_id, project_id, created_at);

-- A snapshot's manifest: one row per file, naming its blob.
CREATE TABLE workspace_snapshot_entries (
    tenant_id   uuid NOT NULL,
    snapshot_id uuid NOT NULL,
    path        text NOT NULL,
    sha256      bytea NOT NULL,
    PRIMARY KEY (tenant_id, snapshot_id, path),
    FOREIGN KEY (tenant_id, snapshot_id) REFERENCES workspace_snapshots (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, sha256) REFERENCES workspace_blobs (tenant_id, sha256)
);

-- The operation journal: each workspace change a run makes, with its inverse, written in the
-- tool call's transaction. before_sha NULL: the file did not exist (inverse: delete it);
-- otherwise the inverse restores before_sha. after_sha NULL: the operation deleted the file.
CREATE TABLE workspace_journal (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           bigint GENERATED ALWAYS AS IDENTITY,
    project_id   uuid NOT NULL,
    run_id       uuid NOT NULL,
    tool_call_id uuid,
    op           text NOT NULL CHECK (op IN ('write', 'delete')),
    path         text NOT NULL,
    before_sha   bytea,
    after_sha    bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX workspace_journal_run ON workspace_journal (tenant_id, run_id, id);

ALTER TABLE workspace_blobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_blobs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON workspace_blobs USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE workspace_file_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_file_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON workspace_file_versions USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE workspace_snapshots ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_snapshots FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON workspace_snapshots USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE workspace_snapshot_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_snapshot_entries FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON workspace_snapshot_entries USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE workspace_journal ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_journal FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON workspace_journal USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- Files written before history existed get their current content as their first recorded
-- version (system-scoped: row-level security is forced for the owner too).
SELECT set_config('app.system', 'on', true);
INSERT INTO workspace_blobs (tenant_id, sha256, content, size)
SELECT DISTINCT ON (tenant_id, sha256) tenant_id, sha256, content, size FROM workspace_files
ON CONFLICT DO NOTHING;
INSERT INTO workspace_file_versions (tenant_id, project_id, path, version, sha256, created_at)
SELECT tenant_id, project_id, path, version, sha256, updated_at FROM workspace_files;

-- +goose Down
DROP TABLE workspace_journal;
DROP TABLE workspace_snapshot_entries;
DROP TABLE workspace_snapshots;
DROP TABLE workspace_file_versions;
DROP TABLE workspace_blobs;
