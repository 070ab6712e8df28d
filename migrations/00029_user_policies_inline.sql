-- +goose Up

-- The user policies test membership and ownership with EXISTS written into each policy. A SQL
-- function whose body holds a subquery is never inlined: Postgres ran it through its function
-- executor, planning its body again in every statement that called it, several times per
-- statement. Written into the policy, the subquery is planned with the statement (a prepared
-- statement's plan keeps it), and one that does not depend on the row runs once per statement,
-- and only when a user is set. What each policy admits is unchanged; a subquery on a table with
-- policies of its own (messages -> conversations, run content -> runs) is filtered by them.

DROP POLICY user_privacy ON conversations;
CREATE POLICY user_privacy ON conversations AS RESTRICTIVE
    USING (agentry_user() IS NULL
           OR ((visibility = 'TENANT' OR user_id = agentry_user())
               AND EXISTS (SELECT 1 FROM memberships m
                           WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                             AND m.user_id = agentry_user())));

DROP POLICY user_privacy ON messages;
CREATE POLICY user_privacy ON messages AS RESTRICTIVE
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM conversations c
        WHERE c.tenant_id = messages.tenant_id AND c.id = messages.conversation_id));

DROP POLICY user_privacy ON runs;
CREATE POLICY user_privacy ON runs AS RESTRICTIVE
    USING (agentry_user() IS NULL
           OR EXISTS (SELECT 1 FROM memberships m
                      WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                        AND m.user_id = agentry_user() AND m.role IN ('OWNER', 'ADMIN'))
           OR (EXISTS (SELECT 1 FROM memberships m
                       WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                         AND m.user_id = agentry_user() AND m.role IN ('MEMBER', 'VIEWER'))
               AND (user_id = agentry_user()
                    OR EXISTS (SELECT 1 FROM conversations c
                               WHERE c.tenant_id = runs.tenant_id AND c.id = runs.conversation_id
                                 AND c.visibility = 'TENANT'))));

-- A run's content: its user's, or everyone's when its conversation is shared (OWNER and ADMIN
-- see no more content than others). The runs subquery passes the runs policy as well.
DROP POLICY user_privacy ON run_events;
CREATE POLICY user_privacy ON run_events AS RESTRICTIVE
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM runs r
        WHERE r.tenant_id = run_events.tenant_id AND r.id = run_events.run_id
          AND (r.user_id = agentry_user() OR EXISTS (
              SELECT 1 FROM conversations c
              WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id AND c.visibility = 'TENANT'))))
    WITH CHECK (true);
DROP POLICY user_privacy ON tool_calls;
CREATE POLICY user_privacy ON tool_calls AS RESTRICTIVE
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM runs r
        WHERE r.tenant_id = tool_calls.tenant_id AND r.id = tool_calls.run_id
          AND (r.user_id = agentry_user() OR EXISTS (
              SELECT 1 FROM conversations c
              WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id AND c.visibility = 'TENANT'))))
    WITH CHECK (true);
DROP POLICY user_privacy ON approvals;
CREATE POLICY user_privacy ON approvals AS RESTRICTIVE
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM runs r
        WHERE r.tenant_id = approvals.tenant_id AND r.id = approvals.run_id
          AND (r.user_id = agentry_user() OR EXISTS (
              SELECT 1 FROM conversations c
              WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id AND c.visibility = 'TENANT'))))
    WITH CHECK (true);

DROP FUNCTION agentry_run_content_visible(uuid, uuid);
DROP FUNCTION agentry_conversation_visible(uuid, text);
DROP FUNCTION agentry_member(text[]);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION agentry_member(roles text[]) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM memberships m
                   WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                     AND m.user_id = agentry_user() AND m.role = ANY (roles))
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION agentry_conversation_visible(owner uuid, visibility text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT agentry_user() IS NULL
        OR ((visibility = 'TENANT' OR owner = agentry_user())
            AND agentry_member(ARRAY['OWNER', 'ADMIN', 'MEMBER', 'VIEWER']))
$$;
-- +goose StatementEnd
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
DROP POLICY user_privacy ON approvals;
CREATE POLICY user_privacy ON approvals AS RESTRICTIVE
    USING (agentry_run_content_visible(tenant_id, run_id)) WITH CHECK (true);
DROP POLICY user_privacy ON tool_calls;
CREATE POLICY user_privacy ON tool_calls AS RESTRICTIVE
    USING (agentry_run_content_visible(tenant_id, run_id)) WITH CHECK (true);
DROP POLICY user_privacy ON run_events;
CREATE POLICY user_privacy ON run_events AS RESTRICTIVE
    USING (agentry_run_content_visible(tenant_id, run_id)) WITH CHECK (true);
DROP POLICY user_privacy ON runs;
CREATE POLICY user_privacy ON runs AS RESTRICTIVE
    USING (agentry_user() IS NULL
           OR agentry_member(ARRAY['OWNER', 'ADMIN'])
           OR (agentry_member(ARRAY['MEMBER', 'VIEWER'])
               AND (user_id = agentry_user()
                    OR EXISTS (SELECT 1 FROM conversations c
                               WHERE c.tenant_id = runs.tenant_id AND c.id = runs.conversation_id AND c.visibility = 'TENANT'))));
DROP POLICY user_privacy ON messages;
CREATE POLICY user_privacy ON messages AS RESTRICTIVE
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM conversations c
        WHERE c.tenant_id = messages.tenant_id AND c.id = messages.conversation_id
          AND agentry_conversation_visible(c.user_id, c.visibility)));
DROP POLICY user_privacy ON conversations;
CREATE POLICY user_privacy ON conversations AS RESTRICTIVE
    USING (agentry_conversation_visible(user_id, visibility));
