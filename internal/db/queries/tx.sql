-- The tenant scope of a transaction (app.tenant_id, app.system) is set by the statement that
-- opens it: db.scopedBegin.

-- name: TxSetRole :exec
SELECT set_config('role', sqlc.arg(role)::text, false);
