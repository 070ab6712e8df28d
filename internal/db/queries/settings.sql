-- name: AgentSettingsGet :one
SELECT * FROM agent_settings WHERE tenant_id = $1 AND user_id = $2;

-- name: AgentSettingsGetForRun :one
-- The settings of run_id's user. Keyed by the run alone, so a worker reads them in the round
-- trip that acquires the run.
SELECT * FROM agent_settings
WHERE tenant_id = sqlc.arg(tenant_id)::uuid
  AND user_id = (SELECT r.user_id FROM runs r WHERE r.tenant_id = sqlc.arg(tenant_id)::uuid AND r.id = sqlc.arg(run_id)::uuid);

-- name: AgentSettingsUpsert :one
INSERT INTO agent_settings (
    tenant_id, user_id, personality, verbosity, auto_execute, approval_threshold,
    max_tokens_per_task, max_retries, timeout_seconds, context_strategy,
    team_max_iterations, team_timeout_minutes, team_token_budget, team_architect_max_turns,
    team_executor_max_turns, team_reviewer_max_turns, subagent_approval, updated_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, now())
ON CONFLICT (tenant_id, user_id) DO UPDATE SET
    personality = EXCLUDED.personality,
    verbosity = EXCLUDED.verbosity,
    auto_execute = EXCLUDED.auto_execute,
    approval_threshold = EXCLUDED.approval_threshold,
    max_tokens_per_task = EXCLUDED.max_tokens_per_task,
    max_retries = EXCLUDED.max_retries,
    timeout_seconds = EXCLUDED.timeout_seconds,
    context_strategy = EXCLUDED.context_strategy,
    team_max_iterations = EXCLUDED.team_max_iterations,
    team_timeout_minutes = EXCLUDED.team_timeout_minutes,
    team_token_budget = EXCLUDED.team_token_budget,
    team_architect_max_turns = EXCLUDED.team_architect_max_turns,
    team_executor_max_turns = EXCLUDED.team_executor_max_turns,
    team_reviewer_max_turns = EXCLUDED.team_reviewer_max_turns,
    subagent_approval = EXCLUDED.subagent_approval,
    updated_at = now()
RETURNING *;
