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

-- name: UserSetPlatformAdmin :one
UPDATE users SET is_platform_admin = sqlc.arg(is_platform_admin) WHERE lower(email) = lower(sqlc.arg(email)) RETURNING *;

-- name: MembershipInsert :one
INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3) RETURNING *;

-- name: InvitationGetByToken :one
-- The invitation whose token hashes to token_hash (system transaction: the token names its
-- tenant only through this row).
SELECT * FROM invitations WHERE token_hash = $1;

-- name: InvitationUpsert :one
-- Invites email to the tenant with role: a new invitation, or a new token, role and expiry
-- for the one already sent to that address.
INSERT INTO invitations (tenant_id, id, email, role, token_hash, invited_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, lower(email)) DO UPDATE
SET role = excluded.role, token_hash = excluded.token_hash, invited_by = excluded.invited_by,
    created_at = now(), expires_at = excluded.expires_at
RETURNING *;

-- name: InvitationDelete :execrows
DELETE FROM invitations WHERE tenant_id = $1 AND id = $2;

-- name: MembershipInsertIfAbsent :execrows
-- Joins a user to a tenant (an accepted invitation); a member already keeps their role.
INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING;

-- name: MembershipGet :one
SELECT * FROM memberships WHERE tenant_id = $1 AND user_id = $2;

-- name: MembershipListByUser :many
-- Every tenant a user belongs to, oldest membership first. Runs in a system transaction (login).
SELECT m.tenant_id, m.user_id, m.role, m.created_at
FROM memberships m
WHERE m.user_id = $1
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
-- The tenant's members and pending invitations (an invitation's id in place of a user id),
-- by id, after an id.
SELECT x.id, x.email, x.name, x.role, x.created_at, x.pending FROM (
    SELECT u.id, u.email, u.name, m.role, m.created_at, false AS pending
    FROM memberships m JOIN users u ON u.id = m.user_id
    WHERE m.tenant_id = sqlc.arg(tenant_id)
    UNION ALL
    SELECT i.id, i.email, NULL::text AS name, i.role, i.created_at, true AS pending
    FROM invitations i
    WHERE i.tenant_id = sqlc.arg(tenant_id)
) x
WHERE sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR x.id > sqlc.arg(after)::uuid
ORDER BY x.id
LIMIT sqlc.arg(lim);

-- name: MembershipCountOwners :one
-- The tenant's owners.
SELECT count(*) FROM memberships WHERE tenant_id = $1 AND role = 'OWNER';

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
WHERE m.user_id = $1
ORDER BY m.created_at, m.tenant_id;
