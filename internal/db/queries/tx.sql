-- The tenant scope of a transaction (app.tenant_id, app.system) is set with its BEGIN, in one
-- round trip: db.beginQuery.

-- name: TxSetRole :exec
SELECT set_config('role', sqlc.arg(role)::text, false);
