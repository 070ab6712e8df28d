-- +goose Up

-- Whether a sub-agent a user's runs spawn waits for that user's yes before it may start
-- (REQUIRED: it is AWAITING_APPROVAL with a `subagent` approval until someone decides).
ALTER TABLE agent_settings
    ADD COLUMN subagent_approval text NOT NULL DEFAULT 'NOT_REQUIRED' CHECK (subagent_approval IN ('NOT_REQUIRED', 'REQUIRED'));
ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check CHECK (kind IN ('tool_call', 'continue', 'rollback', 'escalation', 'team_blocked', 'subagent'));

-- Plans: what a tenant on a plan may use at once. Platform-wide (no tenant owns a plan); a
-- platform admin sets them (setPlan) and puts tenants on them (setTenantPlan). Every tenant is on
-- one (tenants.plan, default 'free').
CREATE TABLE plans (
    name                  text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_-]{0,39}$'),
    -- Sub-agents of one tenant holding a dispatcher slot (QUEUED or RUNNING) at once.
    subagents_running_max integer NOT NULL DEFAULT 8 CHECK (subagents_running_max BETWEEN 1 AND 10000),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
-- The plans the rate limiter knows (internal/ratelimit's Plans) start with the same figure.
INSERT INTO plans (name, subagents_running_max) VALUES ('free', 8), ('pro', 8), ('enterprise', 8);
INSERT INTO plans (name) SELECT DISTINCT plan FROM tenants ON CONFLICT DO NOTHING;
ALTER TABLE tenants ADD CONSTRAINT tenants_plan_fkey FOREIGN KEY (plan) REFERENCES plans (name);

-- A sub-agent's own conversation goes with its run: deleting the parent's conversation deletes
-- the parent run, its descendants (runs_parent_fkey) and, through this, their conversations.
ALTER TABLE conversations ADD COLUMN owner_run_id uuid;
UPDATE conversations c SET owner_run_id = r.id
FROM runs r JOIN subagents s ON s.tenant_id = r.tenant_id AND s.id = r.id
WHERE r.tenant_id = c.tenant_id AND r.conversation_id = c.id;
ALTER TABLE conversations ADD CONSTRAINT conversations_owner_run_fkey
    FOREIGN KEY (tenant_id, owner_run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE
    DEFERRABLE INITIALLY DEFERRED; -- the conversation is inserted before its run
CREATE INDEX conversations_owner_run_idx ON conversations (tenant_id, owner_run_id) WHERE owner_run_id IS NOT NULL;

-- +goose Down
DROP INDEX conversations_owner_run_idx;
ALTER TABLE conversations DROP CONSTRAINT conversations_owner_run_fkey;
ALTER TABLE conversations DROP COLUMN owner_run_id;
ALTER TABLE tenants DROP CONSTRAINT tenants_plan_fkey;
DROP TABLE plans;
DELETE FROM approvals WHERE kind = 'subagent';
ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check CHECK (kind IN ('tool_call', 'continue', 'rollback', 'escalation', 'team_blocked'));
ALTER TABLE agent_settings DROP COLUMN subagent_approval;
