-- +goose Up

-- Memories: facts a user asked agentry to keep (the remember tool), per tenant, scoped to one
-- user and one project. The context builder recalls the ones relevant to a new message with
-- Postgres full-text search (the expression index below; ranked with ts_rank). Users list and
-- delete them (memories, deleteMemory).
CREATE TABLE memories (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    project_id uuid NOT NULL,
    content    text NOT NULL CHECK (length(content) BETWEEN 1 AND 2000),
    -- The run whose remember call stored it (NULL when stored otherwise).
    run_id     uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
-- Remembering the same text twice keeps one row.
CREATE UNIQUE INDEX memories_content_key ON memories (tenant_id, user_id, project_id, md5(content));
CREATE INDEX memories_list_idx ON memories (tenant_id, user_id, project_id, id DESC);
CREATE INDEX memories_fts_idx ON memories USING gin (to_tsvector('english', content));

ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memories USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- +goose Down
DROP TABLE memories;
