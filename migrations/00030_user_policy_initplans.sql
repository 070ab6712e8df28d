-- +goose Up

-- The user policies are written out in each policy instead of calling agentry_member(),
-- agentry_conversation_visible() and agentry_run_content_visible(): SQL functions whose bodies
-- hold a subquery are never inlined, so every call ran its body as a query of its own (about
-- 100 us each: once per statement for a conversation's lock, once per row for a run's events,
-- 0.3 s for 3,000 of them). Written in the policy, the membership test is an uncorrelated
-- EXISTS (an InitPlan, run at most once per statement) and the run test a subplan the planner
-- plans with the statement; both are cached with a prepared statement's plan. Who sees what is
-- unchanged. A role test is dropped where every role is admitted (memberships.role has no
-- other value). The functions stay for the Down migration.
ALTER POLICY user_privacy ON conversations
    USING (agentry_user() IS NULL
           OR ((visibility = 'TENANT' OR user_id = agentry_user())
               AND EXISTS (SELECT 1 FROM memberships m
                           WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                             AND m.user_id = agentry_user())));
ALTER POLICY user_privacy ON messages
    USING (agentry_user() IS NULL
           OR (EXISTS (SELECT 1 FROM memberships m
                       WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                         AND m.user_id = agentry_user())
               AND EXISTS (SELECT 1 FROM conversations c
                           WHERE c.tenant_id = messages.tenant_id AND c.id = messages.conversation_id
                             AND (c.visibility = 'TENANT' OR c.user_id = agentry_user()))));
ALTER POLICY user_privacy ON runs
    USING (agentry_user() IS NULL
           OR EXISTS (SELECT 1 FROM memberships m
                      WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                        AND m.user_id = agentry_user() AND m.role IN ('OWNER', 'ADMIN'))
           OR (EXISTS (SELECT 1 FROM memberships m
                       WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                         AND m.user_id = agentry_user() AND m.role IN ('MEMBER', 'VIEWER'))
               AND (user_id = agentry_user()
                    OR EXISTS (SELECT 1 FROM conversations c
                               WHERE c.tenant_id = runs.tenant_id AND c.id = runs.conversation_id AND c.visibility = 'TENANT'))));
ALTER POLICY user_privacy ON run_events
    USING (agentry_user() IS NULL
           OR (EXISTS (SELECT 1 FROM memberships m
                       WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                         AND m.user_id = agentry_user())
               AND EXISTS (SELECT 1 FROM runs r
                           WHERE r.tenant_id = run_events.tenant_id AND r.id = run_events.run_id
                             AND (r.user_id = agentry_user()
                                  OR EXISTS (SELECT 1 FROM conversations c
                                             WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id
                                               AND c.visibility = 'TENANT')))));
ALTER POLICY user_privacy ON tool_calls
    USING (agentry_user() IS NULL
           OR (EXISTS (SELECT 1 FROM memberships m
                       WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                         AND m.user_id = agentry_user())
               AND EXISTS (SELECT 1 FROM runs r
                           WHERE r.tenant_id = tool_calls.tenant_id AND r.id = tool_calls.run_id
                             AND (r.user_id = agentry_user()
                                  OR EXISTS (SELECT 1 FROM conversations c
                                             WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id
                                               AND c.visibility = 'TENANT')))));
ALTER POLICY user_privacy ON approvals
    USING (agentry_user() IS NULL
           OR (EXISTS (SELECT 1 FROM memberships m
                       WHERE m.tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
                         AND m.user_id = agentry_user())
               AND EXISTS (SELECT 1 FROM runs r
                           WHERE r.tenant_id = approvals.tenant_id AND r.id = approvals.run_id
                             AND (r.user_id = agentry_user()
                                  OR EXISTS (SELECT 1 FROM conversations c
                                             WHERE c.tenant_id = r.tenant_id AND c.id = r.conversation_id
                                               AND c.visibility = 'TENANT')))));

-- +goose Down
ALTER POLICY user_privacy ON approvals USING (agentry_run_content_visible(tenant_id, run_id));
ALTER POLICY user_privacy ON tool_calls USING (agentry_run_content_visible(tenant_id, run_id));
ALTER POLICY user_privacy ON run_events USING (agentry_run_content_visible(tenant_id, run_id));
ALTER POLICY user_privacy ON runs
    USING (agentry_user() IS NULL
           OR agentry_member(ARRAY['OWNER', 'ADMIN'])
           OR (agentry_member(ARRAY['MEMBER', 'VIEWER'])
               AND (user_id = agentry_user()
                    OR EXISTS (SELECT 1 FROM conversations c
                               WHERE c.tenant_id = runs.tenant_id AND c.id = runs.conversation_id AND c.visibility = 'TENANT'))));
ALTER POLICY user_privacy ON messages
    USING (agentry_user() IS NULL OR EXISTS (
        SELECT 1 FROM conversations c
        WHERE c.tenant_id = messages.tenant_id AND c.id = messages.conversation_id
          AND agentry_conversation_visible(c.user_id, c.visibility)));
ALTER POLICY user_privacy ON conversations
    USING (agentry_conversation_visible(user_id, visibility));
