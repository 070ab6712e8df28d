-- +goose Up

-- Runs form trees: a run started by another run (a sub-agent, and later a team phase or a
-- routine step) names its parent. depth is the number of ancestors (0 for a run a person
-- started). Deleting a parent deletes its descendants (their conversation goes with it).
ALTER TABLE runs ADD COLUMN parent_run_id uuid;
ALTER TABLE runs ADD COLUMN depth integer NOT NULL DEFAULT 0 CHECK (depth BETWEEN 0 AND 10);
-- A parent waiting for its children holds no worker: WAITING until they end or the wait
-- times out (wait_until), then it is QUEUED again. wait_for names the children it waits for.
ALTER TABLE runs ADD COLUMN wait_until timestamptz;
ALTER TABLE runs ADD COLUMN wait_for uuid[];
ALTER TABLE runs ADD CONSTRAINT runs_parent_fkey FOREIGN KEY (tenant_id, parent_run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX runs_parent_idx ON runs (tenant_id, parent_run_id) WHERE parent_run_id IS NOT NULL;
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN ('QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'));

-- A sub-agent: a run of kind SUBAGENT (same id) with its role, goal and limits. Its status is
-- the dispatcher's view of the run: PENDING (waiting for a slot), QUEUED (dispatched: its job is
-- enqueued, the slot is held), RUNNING, and the run's terminal status. QUEUED and RUNNING hold
-- a slot (the per-tenant, per-parent and platform counts are of those).
CREATE TABLE subagents (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id              uuid NOT NULL,
    parent_run_id   uuid NOT NULL,
    role            text NOT NULL CHECK (role IN ('RESEARCHER', 'CODER', 'REVIEWER', 'TESTER', 'ANALYST', 'CREATIVE', 'GENERAL')),
    goal            text NOT NULL CHECK (length(goal) BETWEEN 1 AND 20000),
    status          text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'AWAITING_APPROVAL', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    priority        integer NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 10),
    depth           integer NOT NULL CHECK (depth BETWEEN 1 AND 3),
    max_turns       integer NOT NULL DEFAULT 20 CHECK (max_turns BETWEEN 1 AND 100),
    max_tokens      integer NOT NULL DEFAULT 100000 CHECK (max_tokens BETWEEN 1000 AND 1000000),
    timeout_minutes integer NOT NULL DEFAULT 60 CHECK (timeout_minutes BETWEEN 1 AND 240),
    -- The tools the sub-agent may call: its role's, narrowed to what its parent may call.
    tools           text[] NOT NULL DEFAULT '{}',
    -- Its end was reported on the parent's stream (subagent.completed, ...).
    end_reported    boolean NOT NULL DEFAULT false,
    -- The final answer, whole; wait_subagents hands the parent a truncated copy.
    result          text,
    error           text,
    failure_class   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, parent_run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX subagents_parent_idx ON subagents (tenant_id, parent_run_id, id);
-- The dispatcher's candidates and its slot counts.
CREATE INDEX subagents_pending_idx ON subagents (tenant_id, priority, id) WHERE status = 'PENDING';
CREATE INDEX subagents_active_idx ON subagents (tenant_id, parent_run_id) WHERE status IN ('QUEUED', 'RUNNING');

ALTER TABLE subagents ENABLE ROW LEVEL SECURITY;
ALTER TABLE subagents FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON subagents USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- +goose Down
DROP TABLE subagents;
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN ('QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'));
DROP INDEX runs_parent_idx;
ALTER TABLE runs DROP CONSTRAINT runs_parent_fkey;
ALTER TABLE runs DROP COLUMN wait_for;
ALTER TABLE runs DROP COLUMN wait_until;
ALTER TABLE runs DROP COLUMN depth;
ALTER TABLE runs DROP COLUMN parent_run_id;
