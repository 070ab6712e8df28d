-- name: RunNextSeq :one
-- Gives out the run's next event seq. The row lock it takes orders concurrent appends, so seqs
-- are gapless and committed in order.
UPDATE runs SET last_seq = last_seq + sqlc.arg(n)::integer WHERE tenant_id = $1 AND id = $2 RETURNING last_seq;

-- name: RunEventInsert :exec
INSERT INTO run_events (tenant_id, run_id, seq, type, phase, data, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: RunEventList :many
SELECT * FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq > sqlc.arg(after_seq)::integer ORDER BY seq LIMIT sqlc.arg(lim);
