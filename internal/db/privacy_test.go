package db_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// privacyFixture is one tenant with three users: a owns a private and a shared conversation, b
// a private one, and admin none. Every conversation has a run with a message, an event, a tool
// call and an approval.
type privacyFixture struct {
	tenant, a, b, admin                  uuid.UUID
	aPrivate, aShared, bPrivate          uuid.UUID // conversations
	aPrivateRun, aSharedRun, bPrivateRun uuid.UUID
}

func newPrivacyFixture(t *testing.T, ownerURL string) privacyFixture {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	f := privacyFixture{tenant: uuid.New(), a: uuid.New(), b: uuid.New(), admin: uuid.New(),
		aPrivate: uuid.New(), aShared: uuid.New(), bPrivate: uuid.New(),
		aPrivateRun: uuid.New(), aSharedRun: uuid.New(), bPrivateRun: uuid.New()}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	project := uuid.New()
	exec(`SELECT set_config('app.system', 'on', false)`)
	exec(`INSERT INTO tenants (id, name) VALUES ($1, 't')`, f.tenant)
	exec(`INSERT INTO projects (tenant_id, id, name, is_default) VALUES ($1, $2, 'p', true)`, f.tenant, project)
	for u, role := range map[uuid.UUID]string{f.a: "MEMBER", f.b: "MEMBER", f.admin: "ADMIN"} {
		exec(`INSERT INTO users (id, email) VALUES ($1, $2)`, u, u.String()+"@example.com")
		exec(`INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3)`, f.tenant, u, role)
	}
	for _, c := range []struct {
		conv, run, user uuid.UUID
		visibility      string
	}{{f.aPrivate, f.aPrivateRun, f.a, "PRIVATE"}, {f.aShared, f.aSharedRun, f.a, "TENANT"}, {f.bPrivate, f.bPrivateRun, f.b, "PRIVATE"}} {
		exec(`INSERT INTO conversations (tenant_id, id, project_id, user_id, model, visibility) VALUES ($1, $2, $3, $4, 'demo:x', $5)`,
			f.tenant, c.conv, project, c.user, c.visibility)
		exec(`INSERT INTO runs (tenant_id, id, user_id, kind, status, conversation_id, last_seq) VALUES ($1, $2, $3, 'CHAT_TURN', 'AWAITING_APPROVAL', $4, 1)`,
			f.tenant, c.run, c.user, c.conv)
		msg, call := uuid.New(), uuid.New()
		exec(`INSERT INTO messages (tenant_id, id, conversation_id, run_id, position, role, content) VALUES ($1, $2, $3, $4, 1, 'USER', 'secret')`,
			f.tenant, msg, c.conv, c.run)
		exec(`INSERT INTO run_events (tenant_id, run_id, seq, type) VALUES ($1, $2, 1, 'task.queued')`, f.tenant, c.run)
		exec(`INSERT INTO tool_calls (tenant_id, id, run_id, message_id, call_id, turn, name, status) VALUES ($1, $2, $3, $4, 'c1', 1, 'read_file', 'PENDING')`,
			f.tenant, call, c.run, msg)
		exec(`INSERT INTO approvals (tenant_id, id, run_id, kind, expires_at) VALUES ($1, $2, $3, 'continue', now() + interval '1 hour')`,
			f.tenant, uuid.New(), c.run)
	}
	return f
}

// TestUserPrivacyBelowTheServices: queries that forget the user check (every row of the table,
// no WHERE on the user) still see only what the transaction's user may see: their own private
// conversations, shared ones, and the content of those conversations' runs. An admin sees every
// run's record but no private content; a transaction without a user sees the whole tenant, and
// db.TenantWide inside a user's transaction does so only for its savepoint; a removed member
// sees nothing.
func TestUserPrivacyBelowTheServices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL := dbtest.URL(t)
	// Pools of 4: the transactions acting for a user have a pool of their own, as in production.
	d, err := db.Open(ctx, dbtest.PoolURLOf(ownerURL, 4), dbtest.AppRole, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(d.Close)
	f := newPrivacyFixture(t, ownerURL)

	ids := func(ctx context.Context, sql string) map[uuid.UUID]bool {
		t.Helper()
		out := map[uuid.UUID]bool{}
		require.NoError(t, d.InTx(ctx, f.tenant, func(ctx context.Context, tx *db.Tx) error {
			rows, err := tx.Query(ctx, sql)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			for _, id := range got {
				out[id] = true
			}
			return err
		}))
		return out
	}
	set := func(xs ...uuid.UUID) map[uuid.UUID]bool {
		out := map[uuid.UUID]bool{}
		for _, x := range xs {
			out[x] = true
		}
		return out
	}
	queries := map[string]string{
		"conversations": `SELECT id FROM conversations`,
		"messages":      `SELECT conversation_id FROM messages`,
		"runs":          `SELECT id FROM runs`,
		"run_events":    `SELECT run_id FROM run_events`,
		"tool_calls":    `SELECT run_id FROM tool_calls`,
		"approvals":     `SELECT run_id FROM approvals`,
	}
	allConvs := set(f.aPrivate, f.aShared, f.bPrivate)
	allRuns := set(f.aPrivateRun, f.aSharedRun, f.bPrivateRun)
	cases := []struct {
		name        string
		ctx         context.Context
		convs, runs map[uuid.UUID]bool // conversations (and messages); runs' records
		content     map[uuid.UUID]bool // runs whose events, tool calls and approvals are seen
	}{
		{"member b", db.WithUser(ctx, f.b), set(f.aShared, f.bPrivate), set(f.aSharedRun, f.bPrivateRun), set(f.aSharedRun, f.bPrivateRun)},
		{"member a", db.WithUser(ctx, f.a), set(f.aPrivate, f.aShared), set(f.aPrivateRun, f.aSharedRun), set(f.aPrivateRun, f.aSharedRun)},
		{"admin", db.WithUser(ctx, f.admin), set(f.aShared), allRuns, set(f.aSharedRun)},
		{"no user (a worker)", ctx, allConvs, allRuns, allRuns},
		{"tenant-wide in a request", db.TenantWide(db.WithUser(ctx, f.b), "test"), allConvs, allRuns, allRuns},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for table, sql := range queries {
				want := c.content
				switch table {
				case "conversations", "messages":
					want = c.convs
				case "runs":
					want = c.runs
				}
				require.Equal(t, want, ids(c.ctx, sql), table)
			}
		})
	}

	// Writes: b cannot put a message into a's private conversation (nor change it), even by a
	// statement that names it.
	bctx := db.WithUser(ctx, f.b)
	err = d.InTx(bctx, f.tenant, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO messages (tenant_id, id, conversation_id, position, role, content) VALUES ($1, $2, $3, 99, 'USER', 'x')`,
			f.tenant, uuid.New(), f.aPrivate)
		return err
	})
	require.ErrorContains(t, err, "row-level security")
	var changed int64
	require.NoError(t, d.InTx(bctx, f.tenant, func(ctx context.Context, tx *db.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE conversations SET title = 'mine' WHERE tenant_id = $1`, f.tenant)
		changed = tag.RowsAffected()
		return err
	}))
	require.EqualValues(t, 2, changed) // b's own and the shared one, not a's private one

	// A tenant-wide savepoint inside b's transaction sees everything, and b's scope comes back.
	var wide, after int
	require.NoError(t, d.InTx(bctx, f.tenant, func(ctx context.Context, tx *db.Tx) error {
		if err := d.InTx(db.TenantWide(ctx, "test"), f.tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM conversations`).Scan(&wide)
		}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM conversations`).Scan(&after)
	}))
	require.Equal(t, 3, wide)
	require.Equal(t, 2, after)

	// So do the statements a batch queues tenant-wide, and b's scope comes back within the batch.
	var queued, batchAfter int
	require.NoError(t, d.InTx(bctx, f.tenant, func(ctx context.Context, tx *db.Tx) error {
		var b pgx.Batch
		tx.QueueTenantWide(ctx, &b, "test", func(b *pgx.Batch) {
			b.Queue(`SELECT count(*) FROM conversations`).QueryRow(func(r pgx.Row) error { return r.Scan(&queued) })
		})
		b.Queue(`SELECT count(*) FROM conversations`).QueryRow(func(r pgx.Row) error { return r.Scan(&batchAfter) })
		return tx.SendBatch(ctx, &b).Close()
	}))
	require.Equal(t, 3, queued)
	require.Equal(t, 2, batchAfter)

	// What a user sees follows their membership as it is now: removed, b sees nothing, not even
	// their own conversation, whatever their credential still says.
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT set_config('app.system', 'on', false)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2`, f.tenant, f.b)
	require.NoError(t, err)
	for table, sql := range queries {
		require.Empty(t, ids(bctx, sql), "%s of a removed member", table)
	}
}
