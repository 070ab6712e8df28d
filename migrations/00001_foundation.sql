-- +goose Up

-- Tenants are the unit of isolation. A tenant row is visible only inside its own tenant scope
-- (or in an explicit system transaction).
CREATE TABLE tenants (
    id         uuid PRIMARY KEY,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    plan       text NOT NULL DEFAULT 'free',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Users are global: one person may belong to several tenants. A user without a password hash
-- was invited by email and has not signed up yet.
CREATE TABLE users (
    id                uuid PRIMARY KEY,
    email             text NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    name              text,
    password_hash     text,
    is_platform_admin boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE memberships (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER', 'VIEWER')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id, created_at);

CREATE TABLE api_keys (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    prefix       text NOT NULL,
    secret_hash  bytea NOT NULL,
    role         text NOT NULL CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER', 'VIEWER')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX api_keys_prefix_key ON api_keys (prefix);

CREATE TABLE refresh_tokens (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL,
    family_id   uuid NOT NULL,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    rotated_at  timestamptz,
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX refresh_tokens_hash_key ON refresh_tokens (token_hash);
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (tenant_id, family_id);

-- Signing keys for access tokens. The private key is sealed with AGENTRY_MASTER_KEY.
CREATE TABLE signing_keys (
    kid             text PRIMARY KEY,
    algorithm       text NOT NULL CHECK (algorithm = 'EdDSA'),
    public_key      bytea NOT NULL,
    private_key_enc bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    retire_at       timestamptz NOT NULL
);

CREATE TABLE agent_settings (
    tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    personality         text NOT NULL DEFAULT 'BALANCED' CHECK (personality IN ('PRECISE', 'BALANCED', 'CREATIVE', 'MINIMAL')),
    verbosity           text NOT NULL DEFAULT 'NORMAL' CHECK (verbosity IN ('MINIMAL', 'NORMAL', 'VERBOSE', 'DEBUG')),
    auto_execute        boolean NOT NULL DEFAULT false,
    approval_threshold  integer NOT NULL DEFAULT 50 CHECK (approval_threshold BETWEEN 0 AND 100),
    max_tokens_per_task integer NOT NULL DEFAULT 4096 CHECK (max_tokens_per_task BETWEEN 1024 AND 131072),
    max_retries         integer NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 10),
    timeout_seconds     integer NOT NULL DEFAULT 300 CHECK (timeout_seconds BETWEEN 30 AND 3600),
    context_strategy    text NOT NULL DEFAULT 'PRESERVE' CHECK (context_strategy IN ('COMPACT', 'PRESERVE', 'SUMMARIZE')),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- Row-level security. The policy admits rows of the transaction's tenant, or every row inside an
-- explicit system transaction (app.system = 'on', set only by db.InSystemTx).
CREATE FUNCTION agentry_tenant_visible(row_tenant uuid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT row_tenant = nullif(current_setting('app.tenant_id', true), '')::uuid
        OR coalesce(current_setting('app.system', true), '') = 'on'
$$;

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants USING (agentry_tenant_visible(id)) WITH CHECK (agentry_tenant_visible(id));

ALTER TABLE memberships ENABLE ROW LEVEL SECURITY;
ALTER TABLE memberships FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memberships USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON api_keys USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

ALTER TABLE refresh_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE refresh_tokens FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON refresh_tokens USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

ALTER TABLE agent_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_settings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_settings USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- +goose Down
DROP TABLE agent_settings;
DROP TABLE signing_keys;
DROP TABLE refresh_tokens;
DROP TABLE api_keys;
DROP TABLE memberships;
DROP TABLE users;
DROP TABLE tenants;
DROP FUNCTION agentry_tenant_visible(uuid);
