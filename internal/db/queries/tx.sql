-- The tenant scope of a transaction (app.tenant_id, app.system) is set right after its BEGIN,
-- in the batch of its first statement: db.lazyTx.

-- name: TxSetRole :exec
SELECT set_config('role', sqlc.arg(role)::text, false);
