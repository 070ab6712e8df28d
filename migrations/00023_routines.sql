-- +goose Up

-- Roles: who works a routine's agent, gate and cron steps (per tenant; name unique). templates
-- holds the prompt templates (task_task, chat_task, gate_eval, cron_task) and output templates
-- (agent_done, gate_pass, gate_fail), Liquid text each; tools NULL offers every tool.
CREATE TABLE roles (
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               uuid NOT NULL,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    color            text NOT NULL CHECK (color ~ '^#[0-9A-F]{6}$'),
    system_prompt    text NOT NULL CHECK (length(system_prompt) BETWEEN 1 AND 50000),
    developer_prompt text CHECK (length(developer_prompt) <= 50000),
    model            text CHECK (length(model) <= 200),
    templates        jsonb NOT NULL DEFAULT '{}',
    tools            text[],
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX roles_name_key ON roles (tenant_id, name);

-- Routines: a graph of steps (steps and edges as saved by saveRoutine, validated there) with a
-- trigger. next_fire_at is the next cron tick of an active CRON routine (NULL otherwise).
CREATE TABLE routines (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    project_id   uuid NOT NULL,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description  text CHECK (length(description) <= 10000),
    trigger      text NOT NULL CHECK (trigger IN ('MANUAL', 'TASK_READY', 'CRON')),
    cron         text CHECK (length(cron) <= 200),
    timezone     text CHECK (length(timezone) <= 100),
    active       boolean NOT NULL DEFAULT true,
    max_retries  int NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 20),
    steps        jsonb NOT NULL,
    edges        jsonb NOT NULL,
    next_fire_at timestamptz,
    created_by   uuid NOT NULL REFERENCES users (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX routines_name_key ON routines (tenant_id, name);
CREATE INDEX routines_trigger_idx ON routines (tenant_id, project_id, trigger) WHERE active;
CREATE INDEX routines_cron_idx ON routines (next_fire_at) WHERE trigger = 'CRON' AND active;

-- A run of kind ROUTINE: the routine's definition (steps, edges and roles as they were when it
-- started), its RoutineContext (persisted after every step) and where it is: the current step
-- and its execution count, the phase and how often it was retried. Deleting the routine keeps
-- its runs' records (routine_id becomes NULL; the definition copy stays).
CREATE TABLE routine_runs (
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    run_id         uuid NOT NULL,
    routine_id     uuid,
    definition     jsonb NOT NULL,
    context        jsonb NOT NULL,
    current_step   text,
    execution      int NOT NULL DEFAULT 0,
    evaluation     int NOT NULL DEFAULT 0,
    step_started_at timestamptz,
    phase          text,
    phase_start    text,
    retries        int NOT NULL DEFAULT 0,
    executions     jsonb NOT NULL DEFAULT '{}',
    cron_tick      timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, routine_id) REFERENCES routines (tenant_id, id) ON DELETE SET NULL (routine_id)
);
CREATE INDEX routine_runs_routine_idx ON routine_runs (tenant_id, routine_id, run_id DESC);
-- One run per routine and cron tick, whatever the number of schedulers.
CREATE UNIQUE INDEX routine_runs_tick_key ON routine_runs (tenant_id, routine_id, cron_tick) WHERE cron_tick IS NOT NULL;

-- The run an AGENT or GATE step execution (or a CRON step's evaluation) is worked in: a run
-- of kind ROUTINE of its own conversation (the role's prompts and model), driven by the
-- executor; its end wakes the routine run.
CREATE TABLE routine_step_runs (
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    step_run_id    uuid NOT NULL,
    routine_run_id uuid NOT NULL,
    step_key       text NOT NULL,
    step_type      text NOT NULL,
    execution      int NOT NULL,
    evaluation     int NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, step_run_id),
    FOREIGN KEY (tenant_id, step_run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, routine_run_id) REFERENCES routine_runs (tenant_id, run_id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX routine_step_runs_key ON routine_step_runs (tenant_id, routine_run_id, step_key, execution, evaluation);

-- StepResult: one per step execution of a routine run, stored once.
CREATE TABLE routine_step_results (
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    run_id         uuid NOT NULL,
    step_key       text NOT NULL,
    execution      int NOT NULL,
    step_name      text NOT NULL,
    step_type      text NOT NULL,
    role_id        uuid,
    passed         boolean NOT NULL,
    output         text,
    data           jsonb,
    input_tokens   bigint NOT NULL DEFAULT 0,
    output_tokens  bigint NOT NULL DEFAULT 0,
    duration_ms    int NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id, step_key, execution),
    FOREIGN KEY (tenant_id, run_id) REFERENCES routine_runs (tenant_id, run_id) ON DELETE CASCADE
);

ALTER TABLE conversations DROP CONSTRAINT conversations_kind_check;
ALTER TABLE conversations ADD CONSTRAINT conversations_kind_check CHECK (kind IN ('CHAT', 'TASK', 'ROUTINE'));

ALTER TABLE roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE roles FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON roles USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE routines ENABLE ROW LEVEL SECURITY;
ALTER TABLE routines FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON routines USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE routine_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE routine_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON routine_runs USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE routine_step_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE routine_step_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON routine_step_runs USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE routine_step_results ENABLE ROW LEVEL SECURITY;
ALTER TABLE routine_step_results FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON routine_step_results USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- +goose Down
ALTER TABLE conversations DROP CONSTRAINT conversations_kind_check;
ALTER TABLE conversations ADD CONSTRAINT conversations_kind_check CHECK (kind IN ('CHAT', 'TASK'));
DROP TABLE routine_step_results;
DROP TABLE routine_step_runs;
DROP TABLE routine_runs;
DROP TABLE routines;
DROP TABLE roles;
