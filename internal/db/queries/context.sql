-- Context engineering: memories, conversation summaries, what the context builder reads.

-- name: MemoryUpsert :one
-- Stores a memory; the same text remembered again by the same user in the same project keeps
-- one row (its updated_at moves).
INSERT INTO memories (tenant_id, id, user_id, project_id, content, run_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, user_id, project_id, md5(content)) DO UPDATE SET updated_at = now()
RETURNING *;

-- name: MemoryRecall :many
-- A user's memories in a project that share at least one word (after stemming, stop words
-- left out) with the query, best ranked first. The query's lexemes are OR-ed: a message rarely
-- repeats a memory word for word.
WITH q AS (
    SELECT (
        SELECT string_agg(quote_literal(l), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', regexp_replace(sqlc.arg(query)::text, '[\\'']', ' ', 'g')))) AS l
    )::tsquery AS query
)
SELECT m.*, ts_rank(to_tsvector('english', m.content), q.query)::real AS rank
FROM memories m, q
WHERE m.tenant_id = $1 AND m.user_id = $2 AND m.project_id = $3
  AND q.query IS NOT NULL
  AND to_tsvector('english', m.content) @@ q.query
ORDER BY rank DESC, m.id DESC
LIMIT sqlc.arg(lim);

-- name: MemoryList :many
-- A user's memories, newest first, after a cursor (uuid.Nil: from the start), in one project
-- or all (project uuid.Nil), optionally only those matching a full-text search.
SELECT * FROM memories
WHERE tenant_id = $1 AND user_id = $2
  AND (sqlc.arg(project)::uuid = '00000000-0000-0000-0000-000000000000' OR project_id = sqlc.arg(project)::uuid)
  AND (sqlc.arg(search)::text = '' OR to_tsvector('english', content) @@ websearch_to_tsquery('english', sqlc.arg(search)::text))
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR id < sqlc.arg(after)::uuid)
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: MemoryDelete :execrows
DELETE FROM memories WHERE tenant_id = $1 AND user_id = $2 AND id = $3;

-- name: ConversationSetSummary :exec
-- Stores the conversation's running summary and the last message it covers.
UPDATE conversations SET summary = $3, summarized_through = $4, updated_at = now()
WHERE tenant_id = $1 AND id = $2;

-- name: ConversationUpdate :one
-- Changes the fields that are given (NULL: unchanged); an empty title clears it.
UPDATE conversations SET
    title = CASE WHEN sqlc.narg(title)::text IS NULL THEN title ELSE nullif(sqlc.narg(title)::text, '') END,
    mode = coalesce(sqlc.narg(mode), mode),
    system_prompt = coalesce(sqlc.narg(system_prompt), system_prompt),
    agentic = coalesce(sqlc.narg(agentic), agentic),
    updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: ContextProjectTasks :many
-- The project's tasks that are not done, most urgent first, for the context builder.
SELECT * FROM tasks
WHERE tenant_id = $1 AND project_id = $2 AND status <> 'DONE'
ORDER BY CASE priority WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END, id DESC
LIMIT sqlc.arg(lim);

-- name: UsageRecordMinCallIndex :one
-- The lowest call index metered for a run (0 when none is negative): context summaries take the
-- negative indexes -1, -2, ... below the model calls' 0, 1, ...
SELECT coalesce(min(call_index), 0)::integer FROM usage_records WHERE tenant_id = $1 AND run_id = $2;
