-- name: RunInsert :one
-- job_id is the run's River job when it was inserted first (run.Service.InsertJob), else NULL.
INSERT INTO runs (tenant_id, id, user_id, kind, status, conversation_id, conversation_seq, trigger_message_id, idempotency_key, max_attempts, job_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, sqlc.narg(job_id))
RETURNING *;

-- name: RunInsertWithEvents :one
-- RunInsert with the run's first events (seqs 1..n, as events.Encode prepared them)
-- stored by the same statement: the run row is written once, not once more by an append.
WITH r AS (
    INSERT INTO runs (tenant_id, id, user_id, kind, status, conversation_id, conversation_seq, trigger_message_id,
                      idempotency_key, max_attempts, job_id, last_seq)
    VALUES (sqlc.arg(tenant_id)::uuid, sqlc.arg(id)::uuid, sqlc.arg(user_id)::uuid, sqlc.arg(kind)::text, sqlc.arg(status)::text,
            sqlc.narg(conversation_id)::uuid, sqlc.arg(conversation_seq)::bigint, sqlc.narg(trigger_message_id)::uuid,
            sqlc.narg(idempotency_key)::text, sqlc.arg(max_attempts)::integer, sqlc.narg(job_id)::bigint,
            cardinality(sqlc.arg(types)::text[]))
    RETURNING *
), stored AS (
    INSERT INTO run_events (tenant_id, run_id, seq, type, phase, data, created_at)
    SELECT r.tenant_id, r.id, e.ord::integer, e.type, nullif((sqlc.arg(phases)::text[])[e.ord], ''),
           (sqlc.arg(datas)::text[])[e.ord]::jsonb, sqlc.arg(created_at)::timestamptz
    FROM r, unnest(sqlc.arg(types)::text[]) WITH ORDINALITY AS e (type, ord)
)
SELECT * FROM r;

-- name: RunGet :one
SELECT * FROM runs WHERE tenant_id = $1 AND id = $2;

-- name: RunListByIDs :many
-- The tenant's runs among ids (a batch for the GraphQL run loader).
SELECT * FROM runs WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: RunGetForUpdate :one
-- Runs are locked FOR NO KEY UPDATE, here and wherever a run row is locked: their key never
-- changes, and the FOR KEY SHARE lock that a foreign-key check takes on a run (a child's row
-- updated twice in one transaction checks its parent's) must not conflict with it, or two
-- children ending at once, each holding that share and then locking their parent, deadlock.
SELECT * FROM runs WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE;

-- name: RunGetByIdempotencyKey :one
SELECT * FROM runs WHERE tenant_id = $1 AND conversation_id = $2 AND idempotency_key = $3;

-- name: RunSetJob :exec
UPDATE runs SET job_id = $3 WHERE tenant_id = $1 AND id = $2;

-- name: RunList :many
-- The tenant's runs, newest first, filtered by status and kind (empty arrays: any).
SELECT * FROM runs
WHERE tenant_id = $1
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR id < sqlc.arg(after)::uuid)
  AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR status = ANY(sqlc.arg(statuses)::text[]))
  AND (cardinality(sqlc.arg(kinds)::text[]) = 0 OR kind = ANY(sqlc.arg(kinds)::text[]))
  AND (sqlc.narg(user_id)::uuid IS NULL OR user_id = sqlc.narg(user_id)::uuid)
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: RunListByConversation :many
SELECT * FROM runs
WHERE tenant_id = $1 AND conversation_id = $2
  AND (sqlc.arg(after)::uuid = '00000000-0000-0000-0000-000000000000' OR id < sqlc.arg(after)::uuid)
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: RunNextQueued :one
-- The oldest queued run of a conversation that has no job yet (waiting behind the active one).
SELECT * FROM runs
WHERE tenant_id = $1 AND conversation_id = $2 AND status = 'QUEUED' AND job_id IS NULL
ORDER BY conversation_seq
LIMIT 1
FOR NO KEY UPDATE;

-- name: RunListQueuedBehind :many
-- The queued runs of a conversation that wait behind its active one (no job yet), in order.
SELECT * FROM runs
WHERE tenant_id = $1 AND conversation_id = $2 AND status = 'QUEUED' AND job_id IS NULL
ORDER BY conversation_seq
FOR NO KEY UPDATE;

-- name: RunAcquireWithEvents :one
-- A worker takes the run: the attempt is bumped (the new fence) and the lease set. Only a
-- queued or running (rescued) run can be taken, and only by the run's current job: a job the
-- reaper replaced (its worker died) and River later rescued finds the run handed on and stops.
-- The attempt's events are stored by the same statement, after the run's last seq:
-- execution.started {attempt, kind} (started_type), and on the first attempt task.started
-- {kind} (first_type). run.Service.Acquire publishes the same events once it commits.
WITH r AS (
    UPDATE runs SET
        status = 'RUNNING',
        attempt = attempt + 1,
        lease_owner = sqlc.arg(owner)::text,
        lease_expires_at = now() + make_interval(secs => sqlc.arg(lease_seconds)::double precision),
        started_at = coalesce(started_at, statement_timestamp()),
        last_seq = last_seq + CASE WHEN attempt = 0 THEN 2 ELSE 1 END
    WHERE tenant_id = sqlc.arg(tenant_id)::uuid AND id = sqlc.arg(id)::uuid AND status IN ('QUEUED', 'RUNNING')
      AND (job_id IS NULL OR job_id = sqlc.arg(job_id)::bigint)
    RETURNING *
), stored AS (
    INSERT INTO run_events (tenant_id, run_id, seq, type, data, created_at)
    SELECT r.tenant_id, r.id, r.last_seq - (CASE WHEN r.attempt = 1 THEN 2 ELSE 1 END) + e.ord, e.type, e.data,
           sqlc.arg(created_at)::timestamptz
    FROM r, LATERAL (VALUES (1, sqlc.arg(started_type)::text, jsonb_build_object('attempt', r.attempt, 'kind', r.kind)),
                            (2, sqlc.arg(first_type)::text, jsonb_build_object('kind', r.kind))) AS e (ord, type, data)
    WHERE e.ord = 1 OR r.attempt = 1
)
SELECT * FROM r;

-- name: RunFence :one
-- Locks the run if attempt is still current: every write of a worker goes through it, so a
-- stale worker (its run taken over) writes nothing.
SELECT * FROM runs WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'RUNNING' FOR NO KEY UPDATE;

-- name: RunAddUsage :exec
UPDATE runs SET
    input_tokens = input_tokens + sqlc.arg(input_tokens)::bigint,
    output_tokens = output_tokens + sqlc.arg(output_tokens)::bigint,
    cost_micros = cost_micros + sqlc.arg(cost_micros)::bigint,
    llm_calls = greatest(llm_calls, sqlc.arg(llm_calls)::integer),
    turns = greatest(turns, sqlc.arg(turns)::integer)
WHERE tenant_id = $1 AND id = $2 AND attempt = $3;

-- name: RunFinish :one
-- Ends the run in a terminal state (fenced by attempt unless attempt is 0: a run finished
-- before any worker took it).
-- A run whose cancel was requested (cancelRun, an INTERRUPT) does not end COMPLETED: a worker
-- that finished its reply while the cancel was being decided ends it CANCELLED.
UPDATE runs SET
    status = CASE WHEN cancel_requested AND sqlc.arg(status)::text = 'COMPLETED' THEN 'CANCELLED' ELSE sqlc.arg(status)::text END,
    failure_class = sqlc.narg(failure_class),
    error = sqlc.narg(error),
    termination_reason = CASE WHEN cancel_requested AND sqlc.arg(status)::text = 'COMPLETED' THEN 'user_cancel' ELSE sqlc.narg(termination_reason) END,
    finished_at = now(),
    lease_owner = NULL,
    lease_expires_at = NULL
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
RETURNING *;

-- name: RunRequestCancel :one
UPDATE runs SET cancel_requested = true WHERE tenant_id = $1 AND id = $2 RETURNING *;

-- name: RunSetError :exec
-- Records the failure of an attempt that will be retried.
UPDATE runs SET failure_class = sqlc.narg(failure_class), error = sqlc.narg(error)
WHERE tenant_id = $1 AND id = $2 AND attempt = $3;

-- name: ToolCallInsert :one
INSERT INTO tool_calls (tenant_id, id, run_id, message_id, call_id, turn, name, arguments, status, risk)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING *;

-- name: ToolCallListByRun :many
SELECT * FROM tool_calls WHERE tenant_id = $1 AND run_id = $2 ORDER BY created_at, id;

-- name: ToolCallGet :one
SELECT * FROM tool_calls WHERE tenant_id = $1 AND id = $2;

-- name: ToolCallListByRuns :many
-- The tool calls of the tenant's runs among run_ids, each run's in the order they were made.
SELECT * FROM tool_calls WHERE tenant_id = sqlc.arg(tenant_id) AND run_id = ANY(sqlc.arg(run_ids)::uuid[])
ORDER BY run_id, created_at, id;

-- name: ToolCallFinish :one
UPDATE tool_calls SET status = sqlc.arg(status), output = sqlc.narg(output), error = sqlc.narg(error), finished_at = now()
WHERE tenant_id = $1 AND id = $2 AND status IN ('PENDING', 'RUNNING')
RETURNING *;

-- name: ToolCallCancelOpen :many
-- Gives every unfinished tool call of a run a result (cancelled), so none is left without one.
UPDATE tool_calls SET status = 'CANCELLED', error = sqlc.arg(reason)::text, finished_at = now()
WHERE tenant_id = $1 AND run_id = $2 AND status IN ('PENDING', 'RUNNING')
RETURNING *;

-- name: UsageRecordInsert :one
-- One record per LLM call of a run; a retried call that was already metered inserts nothing.
INSERT INTO usage_records (tenant_id, id, run_id, user_id, run_kind, call_index, provider, model, input_tokens, output_tokens, cached_tokens, cost_micros)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (tenant_id, run_id, call_index) DO NOTHING
RETURNING *;

-- name: UsageRecordListByRun :many
SELECT * FROM usage_records WHERE tenant_id = $1 AND run_id = $2 ORDER BY call_index;

-- name: ToolCallStart :one
UPDATE tool_calls SET status = 'RUNNING' WHERE tenant_id = $1 AND id = $2 AND status IN ('PENDING', 'RUNNING') RETURNING *;

-- name: RunRenewLease :execrows
-- The worker's heartbeat: extends the lease while the attempt still owns the run.
UPDATE runs SET lease_expires_at = now() + make_interval(secs => sqlc.arg(lease_seconds)::double precision)
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'RUNNING';

-- name: RunSuspend :one
-- Parks a running run (AWAITING_APPROVAL, PAUSED) without a worker: its job ends, the lease is
-- released, the conversation stays held by it.
UPDATE runs SET status = sqlc.arg(status), lease_owner = NULL, lease_expires_at = NULL, job_id = NULL
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'RUNNING'
RETURNING *;

-- name: RunRequeue :one
-- Makes a parked (or orphaned) run workable again; the caller enqueues its continuation job.
-- Bumping the attempt fences out any worker still holding the old one.
UPDATE runs SET status = 'QUEUED', attempt = attempt + 1, lease_owner = NULL, lease_expires_at = NULL, job_id = NULL
WHERE tenant_id = $1 AND id = $2 AND status = ANY(sqlc.arg(from_statuses)::text[])
RETURNING *;

-- name: RunReopen :one
-- Re-opens an ended run (its user chose CONTINUE on the rollback question): QUEUED again with
-- its end cleared (finished_at, error, failure class, termination reason), the control flags
-- and the circuit breaker reset, and started_at cleared so that the next acquire starts a new
-- wall-clock window. The attempt is bumped; the caller enqueues the continuation job.
UPDATE runs SET status = 'QUEUED', attempt = attempt + 1, lease_owner = NULL, lease_expires_at = NULL, job_id = NULL,
    finished_at = NULL, error = NULL, failure_class = NULL, termination_reason = NULL,
    cancel_requested = false, stop_requested = false, pause_requested = false,
    consecutive_failures = 0, backtracks = 0, must_reflect = false, started_at = NULL
WHERE tenant_id = $1 AND id = $2 AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
RETURNING *;

-- name: RunListExpiredLeases :many
-- Running runs whose worker stopped renewing the lease (system transaction: every tenant).
SELECT tenant_id, id, job_id FROM runs
WHERE status = 'RUNNING' AND lease_expires_at < now()
ORDER BY lease_expires_at
LIMIT sqlc.arg(lim);

-- name: RunSetStopRequested :one
UPDATE runs SET stop_requested = true WHERE tenant_id = $1 AND id = $2 RETURNING *;

-- name: RunSetPauseRequested :one
UPDATE runs SET pause_requested = sqlc.arg(pause_requested)::boolean WHERE tenant_id = $1 AND id = $2 RETURNING *;

-- name: RunSuspendQueued :one
UPDATE runs SET status = 'PAUSED', job_id = NULL WHERE tenant_id = $1 AND id = $2 AND status = 'QUEUED' RETURNING *;

-- name: RunSetBreaker :exec
-- Stores the executor's breaker state (fenced).
UPDATE runs SET consecutive_failures = sqlc.arg(consecutive_failures)::integer, backtracks = sqlc.arg(backtracks)::integer,
    must_reflect = sqlc.arg(must_reflect)::boolean
WHERE tenant_id = $1 AND id = $2 AND attempt = $3;

-- name: MessageExclude :exec
-- Takes messages out of the model's context (a backtrack); they stay for the record.
UPDATE messages SET excluded = true WHERE tenant_id = $1 AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: MessageListNewerUser :many
-- User messages of run run_id's conversation sent after the run's own (queued behind it), in
-- the order they were sent: an index range on messages_context_idx from the run's seq, whatever
-- the conversation's length (r is MATERIALIZED so its fields reach the scan as parameters, like
-- MessageListContext's).
WITH r AS MATERIALIZED (
    SELECT r.conversation_id, r.conversation_seq FROM runs r
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = sqlc.arg(run_id)::uuid
)
SELECT m.* FROM r
JOIN LATERAL (
    SELECT * FROM messages m
    WHERE m.tenant_id = sqlc.arg(tenant_id)::uuid AND m.conversation_id = r.conversation_id
      AND m.run_seq > r.conversation_seq AND m.role = 'USER'
    ORDER BY m.run_seq, m.position
) m ON true
ORDER BY m.run_seq, m.position;

-- name: ConversationInsertOwn :one
-- The conversation of a run of its own (a task's run, a sub-agent, a routine step, a team phase;
-- kind TASK or ROUTINE: not listed among the user's chats). owner_run_id, when given, is the run
-- it goes with (a sub-agent's: the run is inserted after it in the same transaction, the foreign
-- key is checked at commit).
INSERT INTO conversations (tenant_id, id, project_id, user_id, title, kind, model, agentic, system_prompt, owner_run_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, true, $8, sqlc.narg(owner_run_id)::uuid)
RETURNING *;

-- name: RunInsertOwn :one
-- A QUEUED run in a conversation of its own (ConversationInsertOwn), with no job yet.
INSERT INTO runs (tenant_id, id, user_id, kind, status, task_id, parent_run_id, depth, conversation_id, conversation_seq, trigger_message_id, max_attempts)
VALUES ($1, $2, $3, $4, 'QUEUED', $5, $6, $7, $8, $9, $10, $11)
RETURNING *;

-- name: RunLastReply :one
-- A run's newest model reply (a sub-agent's answer, a routine step's or team phase's output):
-- read backwards from the end of the run's conversation (messages_position_key), so it stops at
-- the reply instead of scanning the tenant's messages for the run's.
WITH r AS MATERIALIZED (
    SELECT r.conversation_id FROM runs r
    WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = sqlc.arg(run_id)::uuid
)
SELECT m.* FROM r
JOIN LATERAL (
    SELECT * FROM messages m
    WHERE m.tenant_id = sqlc.arg(tenant_id)::uuid AND m.conversation_id = r.conversation_id
      AND m.run_id = sqlc.arg(run_id)::uuid AND m.role = 'ASSISTANT'
    ORDER BY m.position DESC
    LIMIT 1
) m ON true;
