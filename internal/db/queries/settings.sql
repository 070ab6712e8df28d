-- name: AgentSettingsGet :one
SELECT * FROM agent_settings WHERE tenant_id = $1 AND user_id = $2;

-- name: AgentSettingsUpsert :one
INSERT INTO agent_settings (
    tenant_id, user_id, personality, verbosity, auto_execute, approval_threshold,
    max_tokens_per_task, max_retries, timeout_seconds, context_strategy, updated_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now())
ON CONFLICT (tenant_id, user_id) DO UPDATE SET
    personality = EXCLUDED.personality,
    verbosity = EXCLUDED.verbosity,
    auto_execute = EXCLUDED.auto_execute,
    approval_threshold = EXCLUDED.approval_threshold,
    max_tokens_per_task = EXCLUDED.max_tokens_per_task,
    max_retries = EXCLUDED.max_retries,
    timeout_seconds = EXCLUDED.timeout_seconds,
    context_strategy = EXCLUDED.context_strategy,
    updated_at = now()
RETURNING *;
