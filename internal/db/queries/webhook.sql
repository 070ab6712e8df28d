-- name: WebhookInsert :one
INSERT INTO webhooks (tenant_id, id, url, events, secret_sealed, created_by)
VALUES (@tenant_id, @id, @url, @events, @secret_sealed, @created_by)
RETURNING *;

-- name: WebhookList :many
SELECT * FROM webhooks WHERE tenant_id = @tenant_id ORDER BY created_at, id;

-- name: WebhookListActive :many
-- The tenant's active webhooks and their patterns (the dispatcher's cache).
SELECT id, events FROM webhooks WHERE tenant_id = @tenant_id AND active;

-- name: WebhookGet :one
SELECT * FROM webhooks WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookDelete :execrows
DELETE FROM webhooks WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookDeliveryInsert :one
INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event, payload)
VALUES (@tenant_id, @id, @webhook_id, @event, @payload)
RETURNING *;

-- name: WebhookDeliveryGet :one
SELECT * FROM webhook_deliveries WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookDeliveryList :many
SELECT * FROM webhook_deliveries WHERE tenant_id = @tenant_id AND webhook_id = @webhook_id
ORDER BY created_at DESC, id DESC LIMIT @n;

-- name: WebhookDeliveryRecord :one
-- Records one attempt: its answer, and the delivery's status after it.
UPDATE webhook_deliveries
SET attempts = attempts + 1, status = @status, response_code = sqlc.narg(response_code),
    duration_ms = @duration_ms, error = sqlc.narg(error),
    finished_at = CASE WHEN @status = 'PENDING' THEN NULL ELSE now() END
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: CostAlertClaim :one
-- Claims the alert named key; no row when it was sent already.
INSERT INTO cost_alerts (tenant_id, key) VALUES (@tenant_id, @key)
ON CONFLICT DO NOTHING
RETURNING key;

-- name: UsageCostWindows :one
-- The tenant's metered cost from `recent` and from `since` (earlier): the runaway-cost alert's
-- two windows, in one read of the records.
SELECT coalesce(sum(cost_micros) FILTER (WHERE created_at >= @recent::timestamptz), 0)::bigint AS recent_micros,
       coalesce(sum(cost_micros), 0)::bigint AS since_micros
FROM usage_records
WHERE tenant_id = @tenant_id AND created_at >= @since::timestamptz;
