-- name: ProjectInsert :one
INSERT INTO projects (tenant_id, id, name, description, is_default) VALUES ($1, $2, $3, $4, $5) RETURNING *;

-- name: ProjectGet :one
SELECT * FROM projects WHERE tenant_id = $1 AND id = $2;

-- name: ProjectGetDefault :one
SELECT * FROM projects WHERE tenant_id = $1 AND is_default;

-- name: ConversationInsert :one
INSERT INTO conversations (tenant_id, id, project_id, user_id, title, mode, model, system_prompt, agentic)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING *;

-- name: ConversationGet :one
SELECT * FROM conversations WHERE tenant_id = $1 AND id = $2;

-- name: ConversationGetForRun :one
-- The conversation of run run_id (none for a run outside one). Keyed by the run alone, so a
-- worker reads it in the round trip that acquires the run.
SELECT * FROM conversations
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND id = (SELECT r.conversation_id FROM runs r WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = sqlc.arg(run_id)::uuid);

-- name: ConversationListByIDs :many
-- The tenant's conversations among ids (a batch for the GraphQL conversation loader).
SELECT * FROM conversations WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: ConversationGetForUpdate :one
-- FOR NO KEY UPDATE, like every lock on a conversation or a run: their keys never change, and
-- the FOR KEY SHARE lock a foreign-key check takes on the conversation (a run of it updated
-- twice in one transaction) must not wait for it.
SELECT * FROM conversations WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE;

-- name: ConversationList :many
-- A user's conversations and those shared with the tenant, newest first, after a cursor
-- (uuid.Nil: from the start).
SELECT * FROM conversations
WHERE tenant_id = $1 AND (user_id = $2 OR visibility = 'TENANT') AND kind = 'CHAT' AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR id < sqlc.arg(after)::uuid)
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: ConversationNextPositions :one
-- Reserves n message positions and, when new_run, the next run order number; a non-null
-- active_run_id makes that run the conversation's active one in the same statement.
UPDATE conversations SET
    message_count = message_count + sqlc.arg(n)::bigint,
    run_count = run_count + CASE WHEN sqlc.arg(new_run)::boolean THEN 1 ELSE 0 END,
    active_run_id = COALESCE(sqlc.narg(active_run_id)::uuid, active_run_id),
    updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING message_count, run_count;

-- name: ConversationHandOff :one
-- Ends the turn of the run that ended (done_run_id): the conversation passes to its oldest run
-- queued behind (status QUEUED, no job yet), or goes idle. No row when another run is active
-- already. The caller holds the conversation's row lock, so this statement's snapshot sees
-- every run queued behind. Returns the run now active (NULL: idle); it still needs its job
-- (run.Service.Enqueue, after locking it with RunNextQueued).
UPDATE conversations c SET active_run_id = (
    SELECT r.id FROM runs r
    WHERE r.tenant_id = c.tenant_id AND r.conversation_id = c.id AND r.status = 'QUEUED' AND r.job_id IS NULL
    ORDER BY r.conversation_seq
    LIMIT 1
)
WHERE c.tenant_id = $1 AND c.id = $2 AND (c.active_run_id IS NULL OR c.active_run_id = sqlc.arg(done_run_id)::uuid)
RETURNING c.active_run_id;

-- name: ConversationSetActiveRun :exec
UPDATE conversations SET active_run_id = sqlc.narg(run_id) WHERE tenant_id = $1 AND id = $2;

-- name: MessageInsert :one
INSERT INTO messages (tenant_id, id, conversation_id, run_id, run_seq, position, role, content, parts, token_estimate, llm_call_index, author_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING *;

-- name: MessageGet :one
SELECT * FROM messages WHERE tenant_id = $1 AND id = $2;

-- name: MessageListPage :many
-- A conversation's messages in display order (position), after a position cursor.
SELECT * FROM messages
WHERE tenant_id = $1 AND conversation_id = $2 AND position > sqlc.arg(after_position)::bigint
ORDER BY position
LIMIT sqlc.arg(lim);

-- name: MessageListBefore :many
-- A conversation's last messages before a position (all of them when before is 0), newest
-- first: the page of messages(last:, before:).
SELECT * FROM messages
WHERE tenant_id = $1 AND conversation_id = $2
  AND (sqlc.arg(before_position)::bigint = 0 OR position < sqlc.arg(before_position)::bigint)
ORDER BY position DESC
LIMIT sqlc.arg(lim);

-- name: ConversationBlockersOfDelete :one
-- What keeps a conversation from being deleted: its runs that have not ended, and its runs'
-- questions still waiting for a person (a rollback question outlives its run's end).
SELECT
    (SELECT count(*) FROM runs r
     WHERE r.tenant_id = $1 AND r.conversation_id = $2
       AND r.status IN ('QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL'))::bigint AS unended_runs,
    (SELECT count(*) FROM approvals a JOIN runs r ON r.tenant_id = a.tenant_id AND r.id = a.run_id
     WHERE a.tenant_id = $1 AND r.conversation_id = $2 AND a.status = 'PENDING')::bigint AS pending_approvals;

-- name: ConversationDelete :execrows
-- Deletes a conversation with its messages, runs and their events, tool calls and approvals
-- (usage records stay).
DELETE FROM conversations WHERE tenant_id = $1 AND id = $2;

-- name: MessageListContext :many
-- What the model sees for run run_id of a conversation: the messages after the conversation's
-- stored summary (all of them when there is none) up to the run's own, in run order, then
-- position. Only the window's part is read: the summary's last message (from_seq, from_pos)
-- starts an index range on messages_context_idx (run_seq from from_seq to the run's), so a turn
-- reads the same rows whatever the conversation's length. Keyed by the run alone, so it can go
-- in the round trip that acquires the run. (r is MATERIALIZED: its fields reach the scan as
-- parameters; an inlined coalesce() is not leakproof, so row-level security would keep it out
-- of the index condition.)
WITH r AS MATERIALIZED (
    SELECT r.conversation_id, r.conversation_seq,
           coalesce(s.run_seq, -1) AS from_seq, coalesce(s.position, -1) AS from_pos
    FROM runs r
    JOIN conversations c ON c.tenant_id = r.tenant_id AND c.id = r.conversation_id
    LEFT JOIN messages s ON c.summary <> '' AND s.tenant_id = c.tenant_id AND s.id = c.summarized_through
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = sqlc.arg(run_id)::uuid
)
SELECT m.* FROM r
JOIN LATERAL (
    SELECT * FROM messages m
    WHERE m.tenant_id = sqlc.arg(tenant_id)::uuid AND m.conversation_id = r.conversation_id
      AND m.run_seq >= r.from_seq AND m.run_seq <= r.conversation_seq
      AND (m.run_seq > r.from_seq OR m.position > r.from_pos)
      AND NOT m.excluded
    ORDER BY m.run_seq, m.position
) m ON true
ORDER BY m.run_seq, m.position;

-- name: ConversationSetVisibility :one
UPDATE conversations SET visibility = sqlc.arg(visibility), updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: ConversationShared :one
-- Whether a conversation is shared with its tenant.
SELECT EXISTS (SELECT 1 FROM conversations WHERE tenant_id = $1 AND id = $2 AND visibility = 'TENANT')::boolean;

-- name: RunContentVisible :one
-- Whether the transaction's user may see a run's content (events, tool calls, approvals): the
-- row-level policy's own test.
SELECT agentry_run_content_visible(sqlc.arg(tenant_id)::uuid, sqlc.arg(run_id)::uuid)::boolean;
