-- name: RunEventAppend :one
-- Appends events to a run in one statement: the run's last_seq moves on by their number (the
-- row lock this takes orders concurrent appends, so seqs are gapless and committed in order)
-- and each is stored with its seq, in the order given (an empty phase is none). It returns
-- the run's new last_seq; no row when the run does not exist.
WITH seq AS (
    UPDATE runs SET last_seq = last_seq + cardinality(sqlc.arg(types)::text[])
    WHERE tenant_id = sqlc.arg(tenant_id)::uuid AND id = sqlc.arg(run_id)::uuid
    RETURNING last_seq
), stored AS (
    INSERT INTO run_events (tenant_id, run_id, seq, type, phase, data, created_at)
    SELECT sqlc.arg(tenant_id)::uuid, sqlc.arg(run_id)::uuid, seq.last_seq - cardinality(sqlc.arg(types)::text[]) + e.ord::integer,
           e.type, nullif((sqlc.arg(phases)::text[])[e.ord], ''), (sqlc.arg(datas)::text[])[e.ord]::jsonb, sqlc.arg(created_at)::timestamptz
    FROM seq, unnest(sqlc.arg(types)::text[]) WITH ORDINALITY AS e (type, ord)
)
SELECT seq.last_seq FROM seq;

-- name: RunEventList :many
SELECT * FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq > sqlc.arg(after_seq)::integer ORDER BY seq LIMIT sqlc.arg(lim);
