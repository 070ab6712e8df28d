package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// BenchmarkRunEventsAsUser: a page of 500 of a run's 3,000 events, read by the run's user (the
// user policies apply: the membership test once per statement, the run's visibility per row)
// and by a transaction acting for no user (they do not). The policies are written out in SQL
// (migration 00030): when they called SQL functions with a subquery, each row's check ran a
// function body as a query of its own, and the user's page cost about 50 ms.
func BenchmarkRunEventsAsUser(b *testing.B) {
	d, ownerURL := dbtest.Open(b)
	ctx := context.Background()
	tenant, user, project, conv, runID := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	conn, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`SELECT set_config('app.system', 'on', false)`, nil},
		{`INSERT INTO tenants (id, name) VALUES ($1, 't')`, []any{tenant}},
		{`INSERT INTO users (id, email) VALUES ($1, $2)`, []any{user, user.String() + "@example.com"}},
		{`INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'MEMBER')`, []any{tenant, user}},
		{`INSERT INTO projects (tenant_id, id, name, is_default) VALUES ($1, $2, 'p', true)`, []any{tenant, project}},
		{`INSERT INTO conversations (tenant_id, id, project_id, user_id, model) VALUES ($1, $2, $3, $4, 'demo:x')`, []any{tenant, conv, project, user}},
		{`INSERT INTO runs (tenant_id, id, user_id, kind, status, conversation_id, last_seq) VALUES ($1, $2, $3, 'CHAT_TURN', 'COMPLETED', $4, 3000)`, []any{tenant, runID, user, conv}},
		{`INSERT INTO run_events (tenant_id, run_id, seq, type, data) SELECT $1, $2, i, 'message.delta', '{"text":"x"}' FROM generate_series(1, 3000) AS i`, []any{tenant, runID}},
		{`ANALYZE`, nil},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatal(q.sql, ": ", err)
		}
	}
	if err := conn.Close(ctx); err != nil {
		b.Fatal(err)
	}
	page := func(ctx context.Context, b *testing.B) {
		for b.Loop() {
			if err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				rows, err := tx.Q.RunEventList(ctx, dbsqlc.RunEventListParams{TenantID: tenant, RunID: runID, AfterSeq: 1000, Lim: 500})
				if err == nil && len(rows) != 500 {
					b.Fatalf("%d events read, want 500", len(rows))
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("as the run's user", func(b *testing.B) { page(db.WithUser(ctx, user), b) })
	b.Run("for no user", func(b *testing.B) { page(ctx, b) })
}
