package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db/dbtest"
)

// The catalog queries below inspect Postgres itself, which sqlc cannot type; they exist only in
// this test.
const (
	tenantTablesSQL = `
SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity,
       (SELECT count(*) FROM pg_policies p WHERE p.schemaname = 'public' AND p.tablename = c.relname)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
WHERE c.relkind IN ('r', 'p')
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
ORDER BY 1`
	roleSQL = `
SELECT r.rolsuper, r.rolbypassrls,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relowner = r.oid)
FROM pg_roles r WHERE r.rolname = $1`
)

// TestRowLevelSecurityEverywhere is the RLS meta-test: every table with a tenant_id has RLS
// enabled, forced and a policy, and the application role can neither bypass it nor own a table.
func TestRowLevelSecurityEverywhere(t *testing.T) {
	t.Parallel()
	_, ownerURL := dbtest.Open(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)

	rows, err := conn.Query(ctx, tenantTablesSQL)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var name string
		var enabled, forced bool
		var policies int
		require.NoError(t, rows.Scan(&name, &enabled, &forced, &policies))
		require.True(t, enabled, "%s: row-level security not enabled", name)
		require.True(t, forced, "%s: row-level security not forced", name)
		require.Positive(t, policies, "%s: no policy", name)
		n++
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, n, 4, "expected the tenant-owned tables")

	var super, bypass bool
	var owned int
	require.NoError(t, conn.QueryRow(ctx, roleSQL, dbtest.AppRole).Scan(&super, &bypass, &owned))
	require.False(t, super, "app role is a superuser")
	require.False(t, bypass, "app role bypasses RLS")
	require.Zero(t, owned, "app role owns relations")

	// The application pool really runs as the app role.
	d, _ := dbtest.Open(t)
	var current string
	require.NoError(t, d.Pool.QueryRow(ctx, "SELECT current_user").Scan(&current))
	require.Equal(t, dbtest.AppRole, current)
}
