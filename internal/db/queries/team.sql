-- name: TeamRunInsert :one
INSERT INTO team_runs (tenant_id, id, run_id, user_id, project_id, task_id, goal, max_iterations, timeout_seconds,
    token_budget, architect_model, architect_max_turns, executor_model, executor_max_turns, reviewer_model,
    reviewer_max_turns, deadline)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
RETURNING *;

-- name: TeamRunGet :one
SELECT * FROM team_runs WHERE tenant_id = $1 AND id = $2;

-- name: TeamRunByRun :one
SELECT * FROM team_runs WHERE tenant_id = $1 AND run_id = $2;

-- name: TeamRunForUpdate :one
SELECT * FROM team_runs WHERE tenant_id = $1 AND id = $2 FOR UPDATE;

-- name: TeamRunsByRuns :many
SELECT * FROM team_runs WHERE tenant_id = sqlc.arg(tenant_id) AND run_id = ANY(sqlc.arg(run_ids)::uuid[]);

-- name: TeamRunSetPlan :exec
UPDATE team_runs SET plan = $3 WHERE tenant_id = $1 AND id = $2;

-- name: TeamRunContinue :one
-- One more iteration and a new deadline for a team run the user continued.
UPDATE team_runs SET max_iterations = least(max_iterations + 1, 11), deadline = sqlc.arg(deadline)
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: TeamRunStart :one
-- A team run is RUNNING from its start without a worker of its own: its phases are the runs
-- that workers take. It has no lease, so the reaper leaves it alone.
UPDATE runs SET status = 'RUNNING', started_at = coalesce(started_at, now())
WHERE tenant_id = $1 AND id = $2 AND status = 'QUEUED'
RETURNING *;

-- name: TeamRunRowInsert :one
INSERT INTO runs (tenant_id, id, user_id, kind, status, task_id, conversation_id, conversation_seq, trigger_message_id, max_attempts)
VALUES ($1, $2, $3, 'TEAM', 'QUEUED', $4, $5, $6, $7, 1)
RETURNING *;

-- name: TeamPhaseInsert :one
INSERT INTO team_phases (tenant_id, id, team_run_id, phase, iteration, attempt, model, max_turns, run_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING *;

-- name: TeamPhaseByRun :one
SELECT * FROM team_phases WHERE tenant_id = $1 AND run_id = $2;

-- name: TeamConversationByPhaseRun :one
-- The conversation of the team run that phase run $2 works (NULL: the team run has none).
SELECT r.conversation_id FROM team_phases p
JOIN team_runs t ON t.tenant_id = p.tenant_id AND t.id = p.team_run_id
JOIN runs r ON r.tenant_id = t.tenant_id AND r.id = t.run_id
WHERE p.tenant_id = $1 AND p.run_id = $2;

-- name: TeamPhaseByRunForUpdate :one
SELECT * FROM team_phases WHERE tenant_id = $1 AND run_id = $2 FOR UPDATE;

-- name: TeamPhaseList :many
SELECT * FROM team_phases WHERE tenant_id = $1 AND team_run_id = $2 ORDER BY started_at, id;

-- name: TeamPhaseListByTeams :many
SELECT * FROM team_phases WHERE tenant_id = sqlc.arg(tenant_id) AND team_run_id = ANY(sqlc.arg(team_run_ids)::uuid[])
ORDER BY team_run_id, started_at, id;

-- name: TeamPhaseFinish :one
-- Records a phase's end once (a finished phase is never finished, nor run, again).
UPDATE team_phases SET status = sqlc.arg(status), turns = sqlc.arg(turns)::integer,
    input_tokens = sqlc.arg(input_tokens)::bigint, output_tokens = sqlc.arg(output_tokens)::bigint,
    output = sqlc.narg(output), termination_reason = sqlc.narg(termination_reason), finished_at = now()
WHERE tenant_id = $1 AND id = $2 AND status = 'RUNNING'
RETURNING *;

-- name: TeamPhaseSetVerdict :one
UPDATE team_phases SET verdict = $3 WHERE tenant_id = $1 AND id = $2 RETURNING *;

-- name: TeamBudgetReserve :one
-- Holds n tokens of the team budget for a phase's next model call in place of what the phase
-- held before (old): refused (no row) when used + reserved would exceed the budget.
UPDATE team_runs SET tokens_reserved = tokens_reserved - sqlc.arg(old)::bigint + sqlc.arg(n)::bigint
WHERE tenant_id = $1 AND id = $2
  AND tokens_used + tokens_reserved - sqlc.arg(old)::bigint + sqlc.arg(n)::bigint <= token_budget
RETURNING *;

-- name: TeamBudgetSettle :one
-- Gives back what a phase held (old) and counts what its call used.
UPDATE team_runs SET tokens_reserved = greatest(tokens_reserved - sqlc.arg(old)::bigint, 0),
    tokens_used = tokens_used + sqlc.arg(used)::bigint
WHERE tenant_id = $1 AND id = $2
RETURNING *;

-- name: TeamPhaseSetReserved :exec
UPDATE team_phases SET reserved_tokens = $3 WHERE tenant_id = $1 AND id = $2;

