-- +goose Up

-- The user policies (user_privacy, migration 00022) apply to one role, agentry_app_user, which
-- a transaction takes when it acts for a user (db.InTx with a user in its context: SET LOCAL
-- ROLE, with app.user_id). A transaction without a user (River workers, periodic jobs, the CLI,
-- db.TenantWide) stays agentry_app: the user policies admit every row of the tenant to it
-- anyway, and now the planner does not expand them into its statements (their subqueries were
-- planned with every statement on these tables, most of a turn's planning time).
-- agentry_app_user has agentry_app's privileges and tenant policy. Where the migrating user
-- cannot create roles, a DBA creates agentry_app_user beforehand, grants agentry_app to it and
-- it to that user (deploy/local/README.md).
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentry_app_user') THEN
        CREATE ROLE agentry_app_user NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT pg_has_role('agentry_app_user', 'agentry_app', 'MEMBER') THEN
        GRANT agentry_app TO agentry_app_user;
    END IF;
    IF NOT pg_has_role(current_user, 'agentry_app_user', 'MEMBER') THEN
        EXECUTE format('GRANT agentry_app_user TO %I', current_user);
    END IF;
END
$$;
-- +goose StatementEnd

ALTER POLICY user_privacy ON conversations TO agentry_app_user;
ALTER POLICY user_privacy ON messages TO agentry_app_user;
ALTER POLICY user_privacy ON runs TO agentry_app_user;
ALTER POLICY user_privacy ON run_events TO agentry_app_user;
ALTER POLICY user_privacy ON tool_calls TO agentry_app_user;
ALTER POLICY user_privacy ON approvals TO agentry_app_user;

-- +goose Down
ALTER POLICY user_privacy ON approvals TO PUBLIC;
ALTER POLICY user_privacy ON tool_calls TO PUBLIC;
ALTER POLICY user_privacy ON run_events TO PUBLIC;
ALTER POLICY user_privacy ON runs TO PUBLIC;
ALTER POLICY user_privacy ON messages TO PUBLIC;
ALTER POLICY user_privacy ON conversations TO PUBLIC;
