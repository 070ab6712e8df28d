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

-- name: TenantLockForMembers :one
-- Locks the tenant's row: changes to its members (roles, removals) take it first, one at a
-- time, so that two of them cannot each leave the other's owner as the last one.
SELECT id FROM tenants WHERE id = $1 FOR UPDATE;

-- name: MembershipListPage :many
-- The tenant's members (pending invitations included), oldest account first, after a user id.
SELECT sqlc.embed(m), sqlc.embed(u)
FROM memberships m
JOIN users u ON u.id = m.user_id
WHERE m.tenant_id = $1
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR m.user_id > sqlc.arg(after)::uuid)
ORDER BY m.user_id
LIMIT sqlc.arg(lim);

-- name: MembershipCountOwners :one
-- The tenant's owners who have joined (a pending invitation owns nothing yet).
SELECT count(*) FROM memberships WHERE tenant_id = $1 AND role = 'OWNER' AND invite_token_hash IS NULL;

-- name: MembershipSetRole :one
UPDATE memberships SET role = sqlc.arg(role) WHERE tenant_id = $1 AND user_id = $2 RETURNING *;

-- name: MembershipDelete :execrows
DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2;

-- name: MembershipListTenantsOfUser :many
-- The tenants a user has joined, with their names, oldest membership first. Runs in a system
-- transaction: the rows are other tenants'.
SELECT t.id AS tenant_id, t.name AS tenant_name, m.role, m.created_at
FROM memberships m
JOIN tenants t ON t.id = m.tenant_id
WHERE m.user_id = $1 AND m.invite_token_hash IS NULL
ORDER BY m.created_at, m.tenant_id;
