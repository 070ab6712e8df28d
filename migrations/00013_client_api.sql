-- +goose Up

-- A usage record is what a model call cost: it outlives its run, so that deleting a
-- conversation (and its runs) leaves the tenant's usage and spending history as it was.
ALTER TABLE usage_records DROP CONSTRAINT usage_records_tenant_id_run_id_fkey;

-- changePassword revokes a user's live sessions in every tenant.
CREATE INDEX refresh_tokens_user_live_idx ON refresh_tokens (user_id) WHERE revoked_at IS NULL;

-- +goose Down
DROP INDEX refresh_tokens_user_live_idx;
ALTER TABLE usage_records ADD CONSTRAINT usage_records_tenant_id_run_id_fkey
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, id) ON DELETE CASCADE NOT VALID;
