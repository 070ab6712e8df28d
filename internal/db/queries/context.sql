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

-- name: ProjectGetOfRun :one
-- The project of run run_id's conversation (no row for a run without a conversation): read by
-- the run alone, in the round trip that acquires it.
SELECT p.* FROM projects p
WHERE p.tenant_id = $1 AND p.id = (
    SELECT c.project_id FROM conversations c
    WHERE c.tenant_id = $1 AND c.id = (SELECT r.conversation_id FROM runs r WHERE r.tenant_id = $1 AND r.id = sqlc.arg(run_id))
);

-- name: ContextProjectTasksOfRun :many
-- ContextProjectTasks of the project of run run_id's conversation.
SELECT t.* FROM tasks t
WHERE t.tenant_id = $1 AND t.status <> 'DONE' AND t.project_id = (
    SELECT c.project_id FROM conversations c
    WHERE c.tenant_id = $1 AND c.id = (SELECT r.conversation_id FROM runs r WHERE r.tenant_id = $1 AND r.id = sqlc.arg(run_id))
)
ORDER BY CASE t.priority WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END, t.id DESC
LIMIT sqlc.arg(lim);

-- name: ProjectGetOfConversation :one
-- The project of conversation conversation_id: read with the conversation's lock, before a run
-- of it exists (ProjectGetOfRun's counterpart).
SELECT p.* FROM projects p
WHERE p.tenant_id = $1 AND p.id = (
    SELECT c.project_id FROM conversations c WHERE c.tenant_id = $1 AND c.id = sqlc.arg(conversation_id)
);

-- name: ContextProjectTasksOfConversation :many
-- ContextProjectTasks of the project of conversation conversation_id.
SELECT t.* FROM tasks t
WHERE t.tenant_id = $1 AND t.status <> 'DONE' AND t.project_id = (
    SELECT c.project_id FROM conversations c WHERE c.tenant_id = $1 AND c.id = sqlc.arg(conversation_id)
)
ORDER BY CASE t.priority WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END, t.id DESC
LIMIT sqlc.arg(lim);

-- name: MemoryRecallOfConversation :many
-- MemoryRecall in the project of conversation conversation_id, for a message (query) of its
-- user user_id: a run's recall read before the run exists (MemoryRecallOfRun's counterpart).
WITH q AS (
    SELECT (
        SELECT string_agg(quote_literal(l), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', regexp_replace(sqlc.arg(query)::text, '[\\'']', ' ', 'g')))) AS l
    )::tsquery AS query
)
SELECT m.*, ts_rank(to_tsvector('english', m.content), q.query)::real AS rank
FROM memories m, q
WHERE m.tenant_id = $1 AND m.user_id = sqlc.arg(user_id)
  AND m.project_id = (
    SELECT c.project_id FROM conversations c WHERE c.tenant_id = $1 AND c.id = sqlc.arg(conversation_id)
  )
  AND q.query IS NOT NULL
  AND to_tsvector('english', m.content) @@ q.query
ORDER BY rank DESC, m.id DESC
LIMIT sqlc.arg(lim);

-- name: MemoryRecallOfRun :many
-- MemoryRecall for run run_id: its user's memories in its conversation's project, recalled by
-- the message that started it (for a run without one, the conversation's newest user message).
WITH q AS MATERIALIZED (
    SELECT (
        SELECT string_agg(quote_literal(l), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', regexp_replace(coalesce((
            SELECT coalesce(
                (SELECT m.content FROM messages m WHERE m.tenant_id = r.tenant_id AND m.id = r.trigger_message_id),
                (SELECT m.content FROM messages m
                 WHERE m.tenant_id = r.tenant_id AND m.conversation_id = r.conversation_id AND m.role = 'USER'
                 ORDER BY m.position DESC LIMIT 1))
            FROM runs r WHERE r.tenant_id = $1 AND r.id = sqlc.arg(run_id)
        ), ''), '[\\'']', ' ', 'g')))) AS l
    )::tsquery AS query
)
SELECT m.*, ts_rank(to_tsvector('english', m.content), q.query)::real AS rank
FROM memories m, q
WHERE m.tenant_id = $1
  AND m.user_id = (SELECT r.user_id FROM runs r WHERE r.tenant_id = $1 AND r.id = sqlc.arg(run_id))
  AND m.project_id = (
    SELECT c.project_id FROM conversations c
    WHERE c.tenant_id = $1 AND c.id = (SELECT r.conversation_id FROM runs r WHERE r.tenant_id = $1 AND r.id = sqlc.arg(run_id))
  )
  AND q.query IS NOT NULL
  AND to_tsvector('english', m.content) @@ q.query
ORDER BY rank DESC, m.id DESC
LIMIT sqlc.arg(lim);
