-- +goose Up
-- The application connects (or SET ROLEs) as agentry_app: it owns no table, is not a superuser and
-- cannot bypass row-level security. Where the migrating user cannot create roles, a DBA creates
-- agentry_app beforehand and grants it to that user (see deploy/local/README.md); this migration
-- then only grants privileges.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentry_app') THEN
        CREATE ROLE agentry_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT pg_has_role(current_user, 'agentry_app', 'MEMBER') THEN
        EXECUTE format('GRANT agentry_app TO %I', current_user);
    END IF;
END
$$;
-- +goose StatementEnd

GRANT USAGE ON SCHEMA public TO agentry_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO agentry_app;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO agentry_app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO agentry_app;
-- Tables created later by the migrating user (app migrations and River's) get the same grants.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO agentry_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO agentry_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO agentry_app;
-- The migration ledger is not the application's to change.
REVOKE ALL ON goose_db_version FROM agentry_app;

-- +goose Down
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM agentry_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM agentry_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON FUNCTIONS FROM agentry_app;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM agentry_app;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM agentry_app;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM agentry_app;
REVOKE USAGE ON SCHEMA public FROM agentry_app;
