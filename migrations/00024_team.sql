-- +goose Up

-- Team runs: an Architect plans, an Executor implements, a Reviewer judges, until the reviewer
-- approves. The team run is a run of kind TEAM; each phase (phase x iteration) is a run of
-- kind TEAM_PHASE in a conversation of its own, linked here (not through the runs table).
CREATE TABLE team_runs (
    tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                  uuid NOT NULL,
    run_id              uuid NOT NULL,
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    project_id          uuid NOT NULL,
    task_id             uuid,
    goal                text NOT NULL CHECK (length(goal) BETWEEN 1 AND 20000),
    max_iterations      integer NOT NULL CHECK (max_iterations BETWEEN 1 AND 11),
    timeout_seconds     integer NOT NULL CHECK (timeout_seconds BETWEEN 1 AND 14400),
    token_budget        bigint NOT NULL CHECK (token_budget BETWEEN 1000 AND 10000000),
    tokens_used         bigint NOT NULL DEFAULT 0,
    tokens_reserved     bigint NOT NULL DEFAULT 0 CHECK (tokens_reserved >= 0),
    architect_model     text NOT NULL,
    architect_max_turns integer NOT NULL CHECK (architect_max_turns BETWEEN 1 AND 100),
    executor_model      text NOT NULL,
    executor_max_turns  integer NOT NULL CHECK (executor_max_turns BETWEEN 1 AND 100),
    reviewer_model      text NOT NULL,
    reviewer_max_turns  integer NOT NULL CHECK (reviewer_max_turns BETWEEN 1 AND 100),
    -- The architect's plan, once its phase completed.
    plan                text,
    -- The team run's wall-clock deadline (its start + timeout; renewed when it is continued).
    deadline            timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT team_runs_budget CHECK (tokens_used + tokens_reserved <= token_budget OR tokens_reserved = 0),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, task_id) REFERENCES tasks (tenant_id, id) ON DELETE SET NULL (task_id)
);
CREATE UNIQUE INDEX team_runs_run_key ON team_runs (tenant_id, run_id);

-- One row per phase run: ARCHITECT, EXECUTOR or REVIEWER of an iteration. attempt is 2 for the
-- reviewer asked once more after ending without a valid verdict.
CREATE TABLE team_phases (
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               uuid NOT NULL,
    team_run_id      uuid NOT NULL,
    phase            text NOT NULL CHECK (phase IN ('ARCHITECT', 'EXECUTOR', 'REVIEWER')),
    iteration        integer NOT NULL CHECK (iteration >= 1),
    attempt          integer NOT NULL DEFAULT 1 CHECK (attempt IN (1, 2)),
    model            text NOT NULL,
    max_turns        integer NOT NULL,
    status           text NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    run_id           uuid NOT NULL,
    turns            integer NOT NULL DEFAULT 0,
    input_tokens     bigint NOT NULL DEFAULT 0,
    output_tokens    bigint NOT NULL DEFAULT 0,
    -- The team budget this phase's model call in flight holds (reserve-settle).
    reserved_tokens  bigint NOT NULL DEFAULT 0 CHECK (reserved_tokens >= 0),
    output           text,
    -- The reviewer's valid verdict ({verdict, summary, issues}).
    verdict          jsonb,
    termination_reason text,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, team_run_id) REFERENCES team_runs (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX team_phases_step_key ON team_phases (tenant_id, team_run_id, iteration, phase, attempt);
CREATE UNIQUE INDEX team_phases_run_key ON team_phases (tenant_id, run_id);

ALTER TABLE team_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE team_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON team_runs USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE team_phases ENABLE ROW LEVEL SECURITY;
ALTER TABLE team_phases FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON team_phases USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('CHAT_TURN', 'TASK', 'ROUTINE', 'SUBAGENT', 'TEAM', 'TEAM_PHASE'));

ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check CHECK (kind IN ('tool_call', 'continue', 'rollback', 'escalation', 'team_blocked'));

-- A user's team defaults (startTeamRun's omitted fields).
ALTER TABLE agent_settings
    ADD COLUMN team_max_iterations      integer NOT NULL DEFAULT 3 CHECK (team_max_iterations BETWEEN 1 AND 10),
    ADD COLUMN team_timeout_minutes     integer NOT NULL DEFAULT 30 CHECK (team_timeout_minutes BETWEEN 1 AND 240),
    ADD COLUMN team_token_budget        integer NOT NULL DEFAULT 500000 CHECK (team_token_budget BETWEEN 1000 AND 10000000),
    ADD COLUMN team_architect_max_turns integer NOT NULL DEFAULT 15 CHECK (team_architect_max_turns BETWEEN 1 AND 100),
    ADD COLUMN team_executor_max_turns  integer NOT NULL DEFAULT 30 CHECK (team_executor_max_turns BETWEEN 1 AND 100),
    ADD COLUMN team_reviewer_max_turns  integer NOT NULL DEFAULT 15 CHECK (team_reviewer_max_turns BETWEEN 1 AND 100);

-- +goose Down
ALTER TABLE agent_settings
    DROP COLUMN team_max_iterations, DROP COLUMN team_timeout_minutes, DROP COLUMN team_token_budget,
    DROP COLUMN team_architect_max_turns, DROP COLUMN team_executor_max_turns, DROP COLUMN team_reviewer_max_turns;
DELETE FROM approvals WHERE kind = 'team_blocked';
ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check CHECK (kind IN ('tool_call', 'continue', 'rollback', 'escalation'));
DROP TABLE team_phases;
DROP TABLE team_runs;
DELETE FROM runs WHERE kind = 'TEAM_PHASE';
ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('CHAT_TURN', 'TASK', 'ROUTINE', 'SUBAGENT', 'TEAM'));
