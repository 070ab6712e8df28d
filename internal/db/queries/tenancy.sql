-- name: TenantInsert :one
INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING *;

-- name: TenantGetByID :one
SELECT * FROM tenants WHERE id = $1;

-- name: UserInsert :one
INSERT INTO users (id, email, name, password_hash) VALUES ($1, $2, $3, $4) RETURNING *;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = $1;

-- name: UserGetByEmail :one
SELECT * FROM users WHERE lower(email) = lower(sqlc.arg(email));

-- name: UserClaim :one
-- Sets the password of an invited user (one without a password) when they sign up.
UPDATE users SET password_hash = sqlc.arg(password_hash), name = coalesce(sqlc.narg(name), name)
WHERE id = sqlc.arg(id) AND password_hash IS NULL
RETURNING *;

-- name: UserSetPlatformAdmin :one
UPDATE users SET is_platform_admin = sqlc.arg(is_platform_admin) WHERE lower(email) = lower(sqlc.arg(email)) RETURNING *;

-- name: MembershipInsert :one
INSERT INTO memberships (tenant_id, user_id, role, invite_token_hash) VALUES ($1, $2, $3, $4) RETURNING *;

-- name: MembershipAcceptInvitation :one
-- Activates the pending membership of user whose invitation token hashes to token_hash
-- (system transaction: the token names its tenant only through this row).
UPDATE memberships SET invite_token_hash = NULL
WHERE user_id = sqlc.arg(user_id) AND invite_token_hash = sqlc.arg(token_hash)
RETURNING *;

-- name: MembershipGet :one
SELECT * FROM memberships WHERE tenant_id = $1 AND user_id = $2;

-- name: MembershipListByUser :many
-- Every tenant a user belongs to, oldest membership first. Runs in a system transaction (login).
SELECT m.tenant_id, m.user_id, m.role, m.created_at
FROM memberships m
WHERE m.user_id = $1 AND m.invite_token_hash IS NULL
ORDER BY m.created_at, m.tenant_id;

-- name: UserListByIDsInTenant :many
-- Users of the tenant among ids (a batch for the GraphQL user loader).
SELECT u.* FROM users u
JOIN memberships m ON m.user_id = u.id AND m.tenant_id = sqlc.arg(tenant_id)
WHERE u.id = ANY(sqlc.arg(ids)::uuid[]);
