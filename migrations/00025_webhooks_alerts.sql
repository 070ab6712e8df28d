-- +goose Up

-- Webhooks: a tenant's endpoints that receive its events (those whose type matches one of
-- `events`, exact types or globs). The secret signs every delivery (HMAC-SHA256); it is stored
-- sealed with the master key (AES-GCM, the webhook's id as associated data), never in clear.
CREATE TABLE webhooks (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            uuid NOT NULL,
    url           text NOT NULL CHECK (length(url) <= 2048),
    events        text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 50),
    secret_sealed bytea NOT NULL,
    active        boolean NOT NULL DEFAULT true,
    created_by    uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- One event for one webhook: written in the transaction that stores the event, with the River
-- job that delivers it. status: PENDING (attempts left), DELIVERED, FAILED (attempts used up, or
-- the URL refused). The payload is what every attempt sends, byte for byte.
CREATE TABLE webhook_deliveries (
    tenant_id     uuid NOT NULL,
    id            uuid NOT NULL,
    webhook_id    uuid NOT NULL,
    event         text NOT NULL,
    payload       jsonb NOT NULL,
    status        text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts      integer NOT NULL DEFAULT 0,
    response_code integer,
    duration_ms   integer,
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, webhook_id) REFERENCES webhooks (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_log_idx ON webhook_deliveries (tenant_id, webhook_id, created_at DESC);

-- Cost alerts sent, one row per alert: a budget threshold (50, 80, 100% of a limit) in one
-- budget window, or a runaway-cost alert in one 10-minute window. The key makes each alert
-- happen once however many settlements race for it.
CREATE TABLE cost_alerts (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key        text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

ALTER TABLE webhooks ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhooks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON webhooks USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_deliveries FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON webhook_deliveries USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));
ALTER TABLE cost_alerts ENABLE ROW LEVEL SECURITY;
ALTER TABLE cost_alerts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cost_alerts USING (agentry_tenant_visible(tenant_id)) WITH CHECK (agentry_tenant_visible(tenant_id));

-- +goose Down
DROP TABLE cost_alerts;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
