-- +goose Up

-- Approvals: a question to a person that a run waits on (AWAITING_APPROVAL, no worker holding
-- it). A tool_call approval is bound to one exact call: the tool call row, its tool name and the
-- hash of its arguments (approval.ArgsHash); the executor runs the call only when all three
-- match an APPROVED approval decided before it expired.
CREATE TABLE approvals (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    run_id       uuid NOT NULL,
    tool_call_id uuid,
    kind         text NOT NULL CHECK (kind IN ('tool_call', 'continue', 'rollback', 'escalation')),
    status       text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'APPROVED', 'REJECTED', 'EXPIRED')),
    tool_name    text,
    args_hash    bytea CHECK (octet_length(args_hash) = 32),
    question     text CHECK (length(question) <= 10000),
    data         jsonb NOT NULL DEFAULT '{}',
    note         text CHECK (length(note) <= 2000),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    -- When the approval left PENDING (decided, or found expired); decided_by is the person who
    -- decided (NULL for EXPIRED).
    decided_at   timestamptz,
    decided_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, tool_call_id) REFERENCES tool_calls (tenant_id, id) ON DELETE CASCADE,
    CONSTRAINT approvals_tool_call_bound CHECK (kind <> 'tool_call' OR (tool_call_id IS NOT NULL AND tool_name IS NOT NULL AND args_hash IS NOT NULL)),
    CONSTRAINT approvals_decided CHECK ((status = 'PENDING') = (decided_at IS NULL))
);
CREATE INDEX approvals_run_idx ON approvals (tenant_id, run_id, created_at);
CREATE INDEX approvals_tool_call_idx ON approvals (tenant_id, tool_call_id, created_at) WHERE tool_call_id IS NOT NULL;
-- The expiry sweep (every tenant) reads only pending approvals, oldest deadline first.
CREATE INDEX approvals_due_idx ON approvals (status, expires_at) WHERE status = 'PENDING';
-- A run waits on at most one question at a time.
CREATE UNIQUE INDEX approvals_one_pending_key ON approvals (tenant_id, run_id) WHERE status = 'PENDING';

ALTER TABLE approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE approvals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON approvals USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- +goose Down
DROP TABLE approvals;
