-- +goose Up
-- Run control: graceful stop and pause are requests the executor honours between steps.
ALTER TABLE runs ADD COLUMN stop_requested boolean NOT NULL DEFAULT false;
ALTER TABLE runs ADD COLUMN pause_requested boolean NOT NULL DEFAULT false;
-- Executor state that must survive a retry: consecutive tool failures and backtracks so far.
ALTER TABLE runs ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN backtracks integer NOT NULL DEFAULT 0;
-- Set when the breaker's first level trips: the next model call must reflect, without tools.
ALTER TABLE runs ADD COLUMN must_reflect boolean NOT NULL DEFAULT false;
-- Messages a backtrack took out of the model's context (kept for the record and the UI).
ALTER TABLE messages ADD COLUMN excluded boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE messages DROP COLUMN excluded;
ALTER TABLE runs DROP COLUMN must_reflect;
ALTER TABLE runs DROP COLUMN backtracks;
ALTER TABLE runs DROP COLUMN consecutive_failures;
ALTER TABLE runs DROP COLUMN pause_requested;
ALTER TABLE runs DROP COLUMN stop_requested;
