-- +goose Up

-- A conversation belongs to the user who made it: PRIVATE (the default) is for them alone;
-- TENANT shares it with every member of the tenant.
ALTER TABLE conversations ADD COLUMN visibility text NOT NULL DEFAULT 'PRIVATE'
    CHECK (visibility IN ('PRIVATE', 'TENANT'));
-- The shared conversations of a tenant, newest first (the list shows them with the user's own).
CREATE INDEX conversations_shared_idx ON conversations (tenant_id, id DESC) WHERE visibility = 'TENANT';

-- Row-level privacy inside a tenant. db.InTx sets app.user_id with app.tenant_id when its
-- context carries a user (every API request and socket does). What the user may see follows
-- their membership as it is now (a removed member sees nothing, a demoted admin no more than a
-- member), whatever their credential says. Without a user (River
-- workers, periodic jobs, the CLI, or a path that names a reason with db.TenantWide) the
-- transaction sees the whole tenant; an explicit system transaction sees everything. These
-- policies are RESTRICTIVE: a row must pass them as well as the tenant policy.

-- The user the transaction acts for, or null for a tenant-wide or system transaction.
-- +goose StatementBegin
CREATE FUNCTION agentry_user() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN coalesce(current_setting('app.system', true), '') = 'on' THEN NULL
                ELSE nullif(current_setting('app.user_id', true), '')::uuid END
$$;
-- +goose StatementEnd

-- Whether the transaction's user is a member of its tenant now, with one of roles. Neither
-- depends on a row, so a statement evaluates each once.
-- +goose StatementBegin
CREATE FUNCTION agentry_member(roles text[]) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM memberships m
                   WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                     AND m.user_id = agentry_user() AND m.role = ANY (roles))
$$;
-- +goose StatementEnd

-- A conversation (and its messages): its owner, or every member when it is shared.
-- +goose StatementBegin
CREATE FUNCTION agentry_conversation_visible(owner uuid, visibility text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT agentry_user() IS NULL
        OR ((visibility = 'TENANT' OR owner = agentry_user())
            AND agentry_member(ARRAY['OWNER', 'ADMIN', 'MEMBER', 'VIEWER']))
$$;
-- +goose StatementEnd

-- A run's content (its events, tool calls, approvals, rollback questions): its user, or
-- everyone when its conversation is shared. OWNER and ADMIN see no more content than others.
-- +goose StatementBegin
CREATE FUNCTION agentry_run_content_visible(t uuid, run uuid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT agentry_user() IS NULL OR (agentry_member(ARRAY['OWNER', 'ADMIN', 'MEMBER', 'VIEWER']) AND EXISTS (
        SELECT 1 FROM runs r
        WHERE r.tenant_id = t AND r.id = run
          AND (r.user_id = agentry_user() OR EXISTS (
              SELECT 1 FROM conversations c
              WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id AND c.visibility = 'TENANT'))))
$$;
-- +goose StatementEnd

CREATE POLICY user_privacy ON conversations AS RESTRICTIVE
    USING (agentry_conversation_visible(user_id, visibility));

CREATE POLICY user_privacy ON messages AS RESTRICTIVE
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM conversations c
        WHERE c.tenant_id = messages.tenant_id AND c.id = messages.conversation_id
          AND agentry_conversation_visible(c.user_id, c.visibility)));

-- A run's record (status, cost: its metadata) is seen by its user, by everyone when its
-- conversation is shared, and by the tenant's OWNER and ADMIN.
CREATE POLICY user_privacy ON runs AS RESTRICTIVE
    USING (agentry_user() IS NULL
           OR agentry_member(ARRAY['OWNER', 'ADMIN'])
           OR (agentry_member(ARRAY['MEMBER', 'VIEWER'])
               AND (user_id = agentry_user()
                    OR EXISTS (SELECT 1 FROM conversations c
                               WHERE c.tenant_id = runs.tenant_id AND c.id = runs.conversation_id AND c.visibility = 'TENANT'))));

-- What a run writes (its events, tool calls, approvals) is written by the server for a run the
-- writer was admitted to; a statement that inserts a run and its first events together could not
-- see the new run from the policy's subquery, so these check what is read, updated and deleted
-- (USING) and leave new rows to the tenant policy (WITH CHECK true).
CREATE POLICY user_privacy ON run_events AS RESTRICTIVE
    USING (agentry_run_content_visible(tenant_id, run_id)) WITH CHECK (true);
CREATE POLICY user_privacy ON tool_calls AS RESTRICTIVE
    USING (agentry_run_content_visible(tenant_id, run_id)) WITH CHECK (true);
CREATE POLICY user_privacy ON approvals AS RESTRICTIVE
    USING (agentry_run_content_visible(tenant_id, run_id)) WITH CHECK (true);

-- +goose Down
DROP POLICY user_privacy ON approvals;
DROP POLICY user_privacy ON tool_calls;
DROP POLICY user_privacy ON run_events;
DROP POLICY user_privacy ON runs;
DROP POLICY user_privacy ON messages;
DROP POLICY user_privacy ON conversations;
DROP FUNCTION agentry_run_content_visible(uuid, uuid);
DROP FUNCTION agentry_conversation_visible(uuid, text);
DROP FUNCTION agentry_member(text[]);
DROP FUNCTION agentry_user();
DROP INDEX conversations_shared_idx;
ALTER TABLE conversations DROP COLUMN visibility;
