-- +goose Up

-- A plan's spend limit: the mutations that make the agent spend (sendMessage, runTask, ...) one
-- tenant on the plan may make, spend_rate per second with bursts of spend_burst (each API key
-- of the tenant has half of both). The rate limiter reads them from here (and caches them).
ALTER TABLE plans
    ADD COLUMN spend_rate  integer NOT NULL DEFAULT 10 CHECK (spend_rate BETWEEN 1 AND 100000),
    ADD COLUMN spend_burst integer NOT NULL DEFAULT 20 CHECK (spend_burst BETWEEN 1 AND 100000);
UPDATE plans SET spend_rate = 50, spend_burst = 100 WHERE name = 'pro';
UPDATE plans SET spend_rate = 200, spend_burst = 400 WHERE name = 'enterprise';

-- +goose Down
ALTER TABLE plans DROP COLUMN spend_burst, DROP COLUMN spend_rate;
