-- +goose Up

-- Projects group conversations and tasks and own a workspace. Every tenant has one default
-- project, made at sign-up.
CREATE TABLE projects (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description text NOT NULL DEFAULT '',
    is_default  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX projects_default_key ON projects (tenant_id) WHERE is_default;

CREATE TABLE conversations (
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                 uuid NOT NULL,
    project_id         uuid NOT NULL,
    user_id            uuid NOT NULL REFERENCES users (id),
    title              text CHECK (length(title) <= 500),
    mode               text NOT NULL DEFAULT 'DEFAULT' CHECK (mode IN ('DEFAULT', 'BRAINSTORM', 'OUTPUT_REFINE', 'BROWSER', 'GAME')),
    model              text NOT NULL,
    system_prompt      text NOT NULL DEFAULT '' CHECK (length(system_prompt) <= 100000),
    agentic            boolean NOT NULL DEFAULT true,
    summary            text,
    summarized_through uuid,
    -- The run working on the conversation now (its job is enqueued); queued runs wait behind it.
    active_run_id      uuid,
    -- Counters assigned under the conversation's row lock: message positions and run order.
    message_count      bigint NOT NULL DEFAULT 0,
    run_count          bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id)
);
CREATE INDEX conversations_list_idx ON conversations (tenant_id, user_id, id DESC);

CREATE TABLE runs (
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                 uuid NOT NULL,
    user_id            uuid NOT NULL REFERENCES users (id),
    kind               text NOT NULL CHECK (kind IN ('CHAT_TURN', 'TASK', 'ROUTINE', 'SUBAGENT', 'TEAM')),
    status             text NOT NULL CHECK (status IN ('QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    conversation_id    uuid,
    -- Order of the run within its conversation (1, 2, ...): context and queueing follow it.
    conversation_seq   bigint NOT NULL DEFAULT 0,
    trigger_message_id uuid,
    idempotency_key    text CHECK (length(idempotency_key) <= 200),
    -- Fence: bumped each time a worker takes the run; every write of the run names it.
    attempt            integer NOT NULL DEFAULT 0,
    max_attempts       integer NOT NULL DEFAULT 4,
    turns              integer NOT NULL DEFAULT 0,
    llm_calls          integer NOT NULL DEFAULT 0,
    failure_class      text CHECK (failure_class IN ('TRANSIENT', 'RECOVERABLE', 'TERMINAL')),
    error              text,
    termination_reason text,
    input_tokens       bigint NOT NULL DEFAULT 0,
    output_tokens      bigint NOT NULL DEFAULT 0,
    cost_micros        bigint NOT NULL DEFAULT 0,
    -- Events: the last seq given out (gapless per run).
    last_seq           integer NOT NULL DEFAULT 0,
    job_id             bigint,
    lease_owner        text,
    lease_expires_at   timestamptz,
    cancel_requested   boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX runs_idempotency_key ON runs (tenant_id, conversation_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_conversation_idx ON runs (tenant_id, conversation_id, conversation_seq);
CREATE INDEX runs_list_idx ON runs (tenant_id, id DESC);
CREATE INDEX runs_active_idx ON runs (status, lease_expires_at) WHERE status IN ('RUNNING', 'QUEUED');

CREATE TABLE messages (
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               uuid NOT NULL,
    conversation_id  uuid NOT NULL,
    run_id           uuid,
    -- The conversation_seq of run_id: the model sees messages ordered by (run_seq, position).
    run_seq          bigint NOT NULL DEFAULT 0,
    position         bigint NOT NULL,
    role             text NOT NULL CHECK (role IN ('USER', 'ASSISTANT', 'TOOL', 'SYSTEM')),
    content          text NOT NULL DEFAULT '',
    parts            jsonb NOT NULL DEFAULT '[]',
    token_estimate   integer NOT NULL DEFAULT 0,
    -- The LLM call of the run that produced an assistant message (unique per run: a retried
    -- call never stores its reply twice).
    llm_call_index   integer,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX messages_position_key ON messages (tenant_id, conversation_id, position);
CREATE UNIQUE INDEX messages_llm_call_key ON messages (tenant_id, run_id, llm_call_index) WHERE llm_call_index IS NOT NULL;
CREATE INDEX messages_context_idx ON messages (tenant_id, conversation_id, run_seq, position);

CREATE TABLE run_events (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    run_id     uuid NOT NULL,
    seq        integer NOT NULL,
    type       text NOT NULL,
    phase      text,
    data       jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id, seq),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX run_events_created_idx ON run_events (created_at);

CREATE TABLE tool_calls (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL,
    run_id      uuid NOT NULL,
    message_id  uuid NOT NULL,
    call_id     text NOT NULL,
    turn        integer NOT NULL,
    name        text NOT NULL,
    arguments   jsonb NOT NULL DEFAULT '{}',
    status      text NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'REJECTED')),
    risk        integer NOT NULL DEFAULT 0 CHECK (risk BETWEEN 0 AND 100),
    output      text,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX tool_calls_call_key ON tool_calls (tenant_id, run_id, call_id);

CREATE TABLE usage_records (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            uuid NOT NULL,
    run_id        uuid NOT NULL,
    user_id       uuid NOT NULL,
    run_kind      text NOT NULL,
    call_index    integer NOT NULL,
    provider      text NOT NULL,
    model         text NOT NULL,
    input_tokens  bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cached_tokens bigint NOT NULL DEFAULT 0,
    cost_micros   bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX usage_records_call_key ON usage_records (tenant_id, run_id, call_index);
CREATE INDEX usage_records_time_idx ON usage_records (tenant_id, created_at);

-- A project's workspace: text files stored in Postgres, each write a new version.
CREATE TABLE workspace_files (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    project_id uuid NOT NULL,
    path       text NOT NULL CHECK (length(path) BETWEEN 1 AND 1024),
    content    text NOT NULL,
    size       integer NOT NULL,
    sha256     bytea NOT NULL,
    version    integer NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, project_id, path),
    FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);

ALTER TABLE projects ENABLE ROW LEVEL SECURITY;
ALTER TABLE projects FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON projects USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE conversations ENABLE ROW LEVEL SECURITY;
ALTER TABLE conversations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON conversations USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON runs USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE messages FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON messages USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE run_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE run_events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON run_events USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE tool_calls ENABLE ROW LEVEL SECURITY;
ALTER TABLE tool_calls FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tool_calls USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE usage_records ENABLE ROW LEVEL SECURITY;
ALTER TABLE usage_records FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON usage_records USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE workspace_files ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_files FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON workspace_files USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- Tenants that signed up before projects existed get their default project (a system-scoped
-- statement: row-level security is forced for the owner too).
SELECT set_config('app.system', 'on', true);
INSERT INTO projects (tenant_id, id, name, is_default)
SELECT t.id, gen_random_uuid(), 'Default', true FROM tenants t
WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.tenant_id = t.id AND p.is_default);

-- +goose Down
DROP TABLE workspace_files;
DROP TABLE usage_records;
DROP TABLE tool_calls;
DROP TABLE run_events;
DROP TABLE messages;
DROP TABLE runs;
DROP TABLE conversations;
DROP TABLE projects;
