-- name: SigningKeyInsert :exec
INSERT INTO signing_keys (kid, algorithm, public_key, private_key_enc, retire_at) VALUES ($1, 'EdDSA', $2, $3, $4);

-- name: SigningKeyList :many
-- Keys still valid for verification: an access token lives 15 minutes after its key retires.
SELECT * FROM signing_keys WHERE retire_at > now() - interval '1 hour' ORDER BY created_at DESC;

-- name: APIKeyInsert :one
INSERT INTO api_keys (tenant_id, id, user_id, name, prefix, secret_hash, role)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING *;

-- name: APIKeyAuthenticate :one
-- Runs in a system transaction: the key names its tenant only through this row. The key's owner
-- must still be a member of the tenant; member_role caps the key's role.
SELECT k.tenant_id, k.id, k.user_id, k.secret_hash, k.role, k.revoked_at,
       m.role AS member_role, u.is_platform_admin
FROM api_keys k
JOIN memberships m ON m.tenant_id = k.tenant_id AND m.user_id = k.user_id
JOIN users u ON u.id = k.user_id
WHERE k.prefix = $1;

-- name: APIKeyGet :one
SELECT * FROM api_keys WHERE tenant_id = $1 AND id = $2;

-- name: APIKeyRevoke :one
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: APIKeyListByTenant :many
SELECT * FROM api_keys WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC;

-- name: RefreshTokenInsert :exec
INSERT INTO refresh_tokens (tenant_id, id, family_id, user_id, token_hash, expires_at)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: RefreshTokenGetByHash :one
-- Runs in a system transaction: the opaque token names its tenant only through this row.
SELECT * FROM refresh_tokens WHERE token_hash = $1;

-- name: RefreshTokenRotate :one
-- Marks a live token used. Exactly one of any number of concurrent callers gets the row back.
UPDATE refresh_tokens SET rotated_at = now()
WHERE tenant_id = $1 AND id = $2 AND rotated_at IS NULL AND revoked_at IS NULL AND expires_at > now()
RETURNING *;

-- name: RefreshTokenRevokeFamily :exec
UPDATE refresh_tokens SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = $1 AND family_id = $2;

-- name: RefreshTokenPurgeExpired :execrows
-- Deletes refresh tokens expired for more than a week (kept that long for reuse forensics).
-- Runs in a system transaction.
DELETE FROM refresh_tokens WHERE expires_at < now() - interval '7 days';

-- name: APIKeyRevokeByUser :exec
-- Revokes every key a user made in a tenant (they left it).
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = $1 AND user_id = $2;

-- name: RefreshTokenRevokeByUser :exec
-- Revokes every session of a user in a tenant (they left it).
UPDATE refresh_tokens SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = $1 AND user_id = $2 AND revoked_at IS NULL;

-- name: RefreshTokenRevokeAllOfUser :execrows
-- Revokes every session of a user in every tenant (their password changed). Runs in a system
-- transaction.
UPDATE refresh_tokens SET revoked_at = now()
WHERE user_id = $1 AND revoked_at IS NULL;

-- name: UserSetPassword :exec
UPDATE users SET password_hash = sqlc.arg(password_hash) WHERE id = sqlc.arg(id);

-- name: SessionState :one
-- What an access token of session family_id may do now: its user's role in the tenant (no row:
-- they are no member) and whether the session is still open (not logged out,
-- revoked by a password change or a removal, nor expired).
SELECT m.role,
       EXISTS (SELECT 1 FROM refresh_tokens r
               WHERE r.tenant_id = m.tenant_id AND r.family_id = sqlc.arg(family_id) AND r.user_id = m.user_id
                 AND r.revoked_at IS NULL AND r.expires_at > now()) AS open
FROM memberships m
WHERE m.tenant_id = sqlc.arg(tenant_id) AND m.user_id = sqlc.arg(user_id);

-- name: EmailTokenInsert :exec
INSERT INTO email_tokens (id, user_id, purpose, email, token_hash, expires_at) VALUES ($1, $2, $3, $4, $5, $6);

-- name: EmailTokenUse :one
-- Spends a live token of purpose: exactly one of concurrent callers gets it back.
UPDATE email_tokens SET used_at = now()
WHERE token_hash = sqlc.arg(token_hash) AND purpose = sqlc.arg(purpose) AND used_at IS NULL AND expires_at > now()
RETURNING *;

-- name: EmailTokenSpendAllOfUser :exec
-- Spends a user's other live tokens of purpose (a reset spends every reset link sent before).
UPDATE email_tokens SET used_at = now() WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL;

-- name: UserVerifyEmail :one
-- Marks the user's email verified, when it is still the address the token was sent to.
UPDATE users SET email_verified_at = coalesce(email_verified_at, now())
WHERE id = sqlc.arg(id) AND lower(email) = lower(sqlc.arg(email))
RETURNING *;
