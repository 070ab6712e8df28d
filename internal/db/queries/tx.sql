-- name: TxSetTenant :exec
-- Scopes the transaction to one tenant for row-level security.
SELECT set_config('app.tenant_id', sqlc.arg(tenant_id)::text, true);

-- name: TxSetSystem :exec
-- Opens every tenant's rows to this transaction (db.InSystemTx only).
SELECT set_config('app.system', 'on', true);

-- name: TxSetRole :exec
SELECT set_config('role', sqlc.arg(role)::text, false);
