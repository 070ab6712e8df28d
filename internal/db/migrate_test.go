package db_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/migrations"
)

// TestBudgetStripesMigration: 00012 moves each budget's counters into its stripes (spent into
// stripe 0, each held reservation onto its run's stripe, the rest of each limit dealt out) and
// back again on the way down.
func TestBudgetStripesMigration(t *testing.T) {
	t.Parallel()
	url := dbtest.URLAt(t, 11)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	scalar := func(sql string, args ...any) (n int64) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n), sql)
		return n
	}
	exec(`SELECT set_config('app.system', 'on', false)`)
	tenant, limited, open := uuid.New(), uuid.New(), uuid.New()
	exec(`INSERT INTO tenants (id, name) VALUES ($1, 't')`, tenant)
	exec(`INSERT INTO budgets (tenant_id, id, scope, period, token_limit, cost_limit_micros, period_start, spent_tokens, spent_micros, reserved_tokens, reserved_micros)
	      VALUES ($1, $2, 'TENANT', 'DAY', 10000, NULL, agentry_period_start('DAY', now()), 1000, 50, 2400, 24),
	             ($1, $3, 'TENANT', 'MONTH', NULL, NULL, agentry_period_start('MONTH', now()), 5, 1, 0, 0)`, tenant, limited, open)
	for i, status := range []string{"HELD", "HELD", "HELD", "SETTLED"} {
		exec(`INSERT INTO reservations (tenant_id, id, run_id, call_index, attempt, budget_ids, reserved_tokens, reserved_micros, status, expires_at)
		      VALUES ($1, $2, $3, 0, 1, ARRAY[$4::uuid], $5, $6, $7, now() + interval '1 hour')`,
			tenant, uuid.New(), uuid.New(), limited, 700+100*i, 7+i, status)
	}

	sqlDB, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 12)
	require.NoError(t, err)

	require.Equal(t, int64(32), scalar(`SELECT count(*) FROM budget_stripes`))
	require.Equal(t, int64(1000), scalar(`SELECT sum(spent_tokens) FROM budget_stripes WHERE budget_id = $1 AND stripe = 0`, limited))
	require.Equal(t, int64(1000), scalar(`SELECT sum(spent_tokens) FROM budget_stripes WHERE budget_id = $1`, limited))
	// Each stripe holds exactly the held reservations of its runs.
	require.Zero(t, scalar(`SELECT count(*) FROM budget_stripes s WHERE s.reserved_tokens <> coalesce((
	        SELECT sum(r.reserved_tokens) FROM reservations r
	        WHERE r.status = 'HELD' AND s.budget_id = ANY (r.budget_ids) AND agentry_budget_stripe(r.run_id) = s.stripe), 0)`))
	require.Equal(t, int64(10000), scalar(`SELECT sum(allowed_tokens) FROM budget_stripes WHERE budget_id = $1`, limited))
	require.Zero(t, scalar(`SELECT count(*) FROM budget_stripes WHERE budget_id = $1 AND spent_tokens + reserved_tokens > allowed_tokens`, limited))
	require.Zero(t, scalar(`SELECT count(*) FROM budget_stripes WHERE allowed_micros IS NOT NULL OR (budget_id = $1 AND allowed_tokens IS NOT NULL)`, open))
	require.Equal(t, int64(2400), scalar(`SELECT reserved_tokens FROM budget_totals WHERE id = $1`, limited))
	require.Equal(t, int64(50), scalar(`SELECT spent_micros FROM budget_totals WHERE id = $1`, limited))
	require.Equal(t, int64(5), scalar(`SELECT spent_tokens FROM budget_totals WHERE id = $1`, open))

	_, err = p.Down(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1000+2400), scalar(`SELECT spent_tokens + reserved_tokens FROM budgets WHERE id = $1`, limited))
	require.Equal(t, int64(24), scalar(`SELECT reserved_micros FROM budgets WHERE id = $1`, limited))
	require.Equal(t, int64(5), scalar(`SELECT spent_tokens FROM budgets WHERE id = $1`, open))
}

// TestConsentMigration: 00020 turns pending memberships into invitations (same token, role and
// email), removes the password-less users made for them, keeps real members, and names the
// author of each user message (the conversation's user).
func TestConsentMigration(t *testing.T) {
	t.Parallel()
	url := dbtest.URLAt(t, 19)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	scalar := func(sql string, args ...any) (n int64) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n), sql)
		return n
	}
	exec(`SELECT set_config('app.system', 'on', false)`)
	tenant, owner, invited, project, conv := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	exec(`INSERT INTO tenants (id, name) VALUES ($1, 't')`, tenant)
	exec(`INSERT INTO users (id, email, password_hash) VALUES ($1, 'owner@example.com', 'x'), ($2, 'invited@example.com', NULL)`, owner, invited)
	exec(`INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'OWNER')`, tenant, owner)
	exec(`INSERT INTO memberships (tenant_id, user_id, role, invite_token_hash) VALUES ($1, $2, 'ADMIN', '\x0102')`, tenant, invited)
	exec(`INSERT INTO projects (tenant_id, id, name, is_default) VALUES ($1, $2, 'p', true)`, tenant, project)
	exec(`INSERT INTO conversations (tenant_id, id, project_id, user_id, model) VALUES ($1, $2, $3, $4, 'demo:x')`, tenant, conv, project, owner)
	exec(`INSERT INTO messages (tenant_id, id, conversation_id, position, role, content) VALUES ($1, $2, $3, 0, 'USER', 'hi'), ($1, $4, $3, 1, 'ASSISTANT', 'hello')`,
		tenant, uuid.New(), conv, uuid.New())

	sqlDB, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 20)
	require.NoError(t, err)

	require.Equal(t, int64(1), scalar(`SELECT count(*) FROM invitations WHERE tenant_id = $1 AND email = 'invited@example.com' AND role = 'ADMIN' AND token_hash = '\x0102'`, tenant))
	require.Zero(t, scalar(`SELECT count(*) FROM users WHERE id = $1`, invited), "the invited placeholder user stays")
	require.Equal(t, int64(1), scalar(`SELECT count(*) FROM memberships WHERE tenant_id = $1`, tenant))
	require.Equal(t, int64(1), scalar(`SELECT count(*) FROM messages WHERE author_id = $1 AND role = 'USER'`, owner))
	require.Zero(t, scalar(`SELECT count(*) FROM messages WHERE author_id IS NOT NULL AND role = 'ASSISTANT'`))

	_, err = p.Down(ctx)
	require.NoError(t, err)
}
