-- +goose Up

-- Tasks: units of work in a project that a TASK run works on until done. The slug is derived
-- from the title when the task is made and stays the same afterwards.
CREATE TABLE tasks (
    tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                  uuid NOT NULL,
    project_id          uuid NOT NULL,
    title               text NOT NULL CHECK (length(title) BETWEEN 1 AND 300),
    description         text CHECK (length(description) <= 50000),
    acceptance_criteria text CHECK (length(acceptance_criteria) <= 50000),
    tags                text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 20),
    -- Who made the task: 'user' or the name of the role that did (an agent role).
    source              text NOT NULL DEFAULT 'user' CHECK (length(source) BETWEEN 1 AND 50),
    status              text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'READY', 'IN_PROGRESS', 'DONE')),
    priority            text NOT NULL DEFAULT 'MEDIUM' CHECK (priority IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')),
    type                text NOT NULL DEFAULT 'TASK' CHECK (type IN ('BUG', 'FEATURE', 'TASK')),
    slug                text NOT NULL CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(slug) <= 80),
    complexity          text NOT NULL DEFAULT 'STANDARD' CHECK (complexity IN ('SIMPLE', 'STANDARD', 'COMPLEX')),
    created_by          uuid NOT NULL REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX tasks_slug_key ON tasks (tenant_id, project_id, slug);
CREATE INDEX tasks_list_idx ON tasks (tenant_id, project_id, id DESC);

ALTER TABLE tasks ENABLE ROW LEVEL SECURITY;
ALTER TABLE tasks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tasks USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- The task a TASK run works on.
ALTER TABLE runs ADD COLUMN task_id uuid;
ALTER TABLE runs ADD CONSTRAINT runs_task_fkey FOREIGN KEY (tenant_id, task_id) REFERENCES tasks (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX runs_task_idx ON runs (tenant_id, task_id, id DESC) WHERE task_id IS NOT NULL;

-- A conversation is a chat (listed by `conversations`) or a task run's own conversation.
ALTER TABLE conversations ADD COLUMN kind text NOT NULL DEFAULT 'CHAT' CHECK (kind IN ('CHAT', 'TASK'));

-- +goose Down
ALTER TABLE conversations DROP COLUMN kind;
DROP INDEX runs_task_idx;
ALTER TABLE runs DROP CONSTRAINT runs_task_fkey;
ALTER TABLE runs DROP COLUMN task_id;
DROP TABLE tasks;
