-- +goose Up
-- Invitations need consent and a verified address: an invitation is its own row (an email, a
-- role and a token's hash), no user row is made for an invited email, and it is joined by a
-- signed-in user whose verified email is the invited one. Email tokens prove an address
-- (verification) or allow one password reset. Messages name their author.
SELECT set_config('app.system', 'on', true);

ALTER TABLE users ADD COLUMN email_verified_at timestamptz;

CREATE TABLE invitations (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         uuid NOT NULL,
    email      text NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    role       text NOT NULL CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER', 'VIEWER')),
    token_hash bytea NOT NULL,
    invited_by uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX invitations_token_key ON invitations (token_hash);
CREATE UNIQUE INDEX invitations_email_key ON invitations (tenant_id, lower(email));
ALTER TABLE invitations ENABLE ROW LEVEL SECURITY;
ALTER TABLE invitations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON invitations USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- Pending memberships become invitations; the password-less users made for them go.
INSERT INTO invitations (tenant_id, id, email, role, token_hash, created_at, expires_at)
SELECT m.tenant_id, gen_random_uuid(), u.email, m.role, m.invite_token_hash, m.created_at, now() + interval '14 days'
FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.invite_token_hash IS NOT NULL;
DELETE FROM memberships WHERE invite_token_hash IS NOT NULL;
DELETE FROM users u WHERE u.password_hash IS NULL AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id);
DROP INDEX memberships_invite_token_key;
ALTER TABLE memberships DROP COLUMN invite_token_hash;

-- Tokens sent by email: VERIFY proves the address it was sent to, RESET sets a new password
-- once. Users are not a tenant's, and neither are their tokens.
CREATE TABLE email_tokens (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose    text NOT NULL CHECK (purpose IN ('VERIFY', 'RESET')),
    email      text NOT NULL,
    token_hash bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE UNIQUE INDEX email_tokens_hash_key ON email_tokens (token_hash);
CREATE INDEX email_tokens_user_idx ON email_tokens (user_id, purpose);

ALTER TABLE messages ADD COLUMN author_id uuid REFERENCES users (id) ON DELETE SET NULL;
UPDATE messages m SET author_id = c.user_id
FROM conversations c
WHERE m.role = 'USER' AND c.tenant_id = m.tenant_id AND c.id = m.conversation_id;

-- +goose Down
SELECT set_config('app.system', 'on', true);
ALTER TABLE messages DROP COLUMN author_id;
DROP TABLE email_tokens;
ALTER TABLE memberships ADD COLUMN invite_token_hash bytea;
CREATE UNIQUE INDEX memberships_invite_token_key ON memberships (invite_token_hash) WHERE invite_token_hash IS NOT NULL;
DROP TABLE invitations;
ALTER TABLE users DROP COLUMN email_verified_at;
