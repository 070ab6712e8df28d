package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// statementCounter is a pgx tracer counting the statements run and the rows they returned.
type statementCounter struct {
	statements, rows atomic.Int64
	on               atomic.Bool
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if c.on.Load() {
		c.statements.Add(1)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if c.on.Load() && d.CommandTag.Select() {
		c.rows.Add(d.CommandTag.RowsAffected())
	}
}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *statementCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if c.on.Load() {
		c.statements.Add(1)
		if d.CommandTag.Select() {
			c.rows.Add(d.CommandTag.RowsAffected())
		}
	}
}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// readRows is the rows read from every table by this backend's statements not yet reported to
// the statistics (heap tuples fetched by index scans and read by sequential scans).
const readRows = `SELECT coalesce(sum(seq_tup_read + idx_tup_fetch), 0)::bigint FROM pg_stat_xact_user_tables`

// TestTurnRequestReadsOnlyItsWindow: building a turn's request (the reads done with the lease,
// the context builder and the window) in a conversation of 2,000 messages, whose stored summary
// covers all but the last few, in a tenant with another conversation as long, runs a bounded
// number of statements that return and read (Postgres's own counts for the transaction,
// pg_stat_xact_user_tables) a bounded number of rows, with generic plans: the messages after
// the summary, never the conversation from its start nor the tenant's other rows. Counted, not
// timed.
func TestTurnRequestReadsOnlyItsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	counter := &statementCounter{}
	ownerURL := dbtest.URL(t)
	d, err := db.OpenTraced(ctx, dbtest.PoolURL(ownerURL), dbtest.AppRole, slog.New(slog.DiscardHandler), counter)
	require.NoError(t, err)
	t.Cleanup(d.Close)

	const history = 2000
	tenantID, userID, projectID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	convID, runID, triggerID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	otherID := uuid.Must(uuid.NewV7())
	err = d.InSystemTx(ctx, "test: a conversation of 2,000 messages", func(ctx context.Context, tx *db.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO tenants (id, name) VALUES ($1, 'long')`, []any{tenantID}},
			{`INSERT INTO users (id, email) VALUES ($1, $2)`, []any{userID, userID.String() + "@example.com"}},
			{`INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'OWNER')`, []any{tenantID, userID}},
			{`INSERT INTO projects (tenant_id, id, name, is_default) VALUES ($1, $2, 'p', true)`, []any{tenantID, projectID}},
			{`INSERT INTO conversations (tenant_id, id, project_id, user_id, model, message_count, run_count)
			  VALUES ($1, $2, $3, $4, 'openai:gpt-4o', $5 + 1, $5 / 2 + 1)`, []any{tenantID, convID, projectID, userID, history}},
			// Earlier turns: a user message and a reply each, run_seq 1..1000.
			{`INSERT INTO messages (tenant_id, id, conversation_id, run_seq, position, role, content, parts, token_estimate)
			  SELECT $1, gen_random_uuid(), $2, (i + 1) / 2, i,
			         CASE WHEN i % 2 = 1 THEN 'USER' ELSE 'ASSISTANT' END, 'message number ' || i,
			         jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'message number ' || i)), 5
			  FROM generate_series(1, $3::int) AS i`, []any{tenantID, convID, history}},
			// Another conversation of the tenant as long: the tenant's history must not be read.
			{`INSERT INTO conversations (tenant_id, id, project_id, user_id, model, message_count, run_count)
			  VALUES ($1, $2, $3, $4, 'openai:gpt-4o', $5::bigint, $5::bigint / 2)`, []any{tenantID, otherID, projectID, userID, history}},
			{`INSERT INTO messages (tenant_id, id, conversation_id, run_seq, position, role, content, parts, token_estimate)
			  SELECT $1, gen_random_uuid(), $2, (i + 1) / 2, i,
			         CASE WHEN i % 2 = 1 THEN 'USER' ELSE 'ASSISTANT' END, 'other ' || i,
			         jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'other ' || i)), 2
			  FROM generate_series(1, $3::int) AS i`, []any{tenantID, otherID, history}},
			// The summary covers every message but the last four.
			{`UPDATE conversations SET summary = 'The user counted messages.',
			         summarized_through = (SELECT id FROM messages WHERE tenant_id = $1 AND conversation_id = $2 AND position = $3)
			  WHERE tenant_id = $1 AND id = $2`, []any{tenantID, convID, history - 4}},
			{`INSERT INTO runs (tenant_id, id, user_id, kind, status, conversation_id, conversation_seq, trigger_message_id, attempt)
			  VALUES ($1, $2, $3, 'CHAT_TURN', 'RUNNING', $4, $5 / 2 + 1, $6, 1)`, []any{tenantID, runID, userID, convID, history, triggerID}},
			{`INSERT INTO messages (tenant_id, id, conversation_id, run_id, run_seq, position, role, content, parts, token_estimate)
			  VALUES ($1, $2, $3, $4, $5 / 2 + 1, $5 + 1, 'USER', 'and the next one?',
			          '[{"type":"text","text":"and the next one?"}]', 5)`, []any{tenantID, triggerID, convID, runID, history}},
		} {
			if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	// Statistics as autovacuum would leave them: plans for tables of this size.
	owner, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	_, err = owner.Exec(ctx, "ANALYZE")
	require.NoError(t, err)
	require.NoError(t, owner.Close(ctx))

	e := New(d, run.NewService(d, nil, slog.New(slog.DiscardHandler)), nil, nil, slog.New(slog.DiscardHandler),
		WithContextWindow(contextwin.New(contextwin.Options{})))
	model := llm.Lookup("openai", "gpt-4o")

	var (
		req                    llm.Request
		statements, rows, read int64
		want                   state
	)
	err = d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: runID})
		if err != nil {
			return err
		}
		// Generic plans, as a connection ends up with for statements it runs often: they must
		// not scan the tenant's or the conversation's rows either.
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		lease := run.Lease{Run: r, Attempt: 1}
		tr := &attempt{e: e}
		// A backend's counts not yet reported (its earlier transactions') show in these views
		// too: what the request reads is the difference.
		var before int64
		if err := tx.QueryRow(ctx, readRows).Scan(&before); err != nil {
			return err
		}
		counter.on.Store(true)
		first := tr.firstReads(ctx, tenantID, runID)
		var b pgx.Batch
		first.Queue(&b)
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		if err := first.Then(ctx, tx, lease); err != nil {
			return err
		}
		want = *tr.first
		tr.lease = lease
		var applied bool
		if req, applied, err = tr.request(ctx, model, *tr.first, false, false); err != nil {
			return err
		}
		counter.on.Store(false)
		require.False(t, applied, "the history after the summary fits: nothing to summarise")
		statements, rows = counter.statements.Load(), counter.rows.Load()
		// The rows this transaction's statements read from every table (heap tuples fetched by
		// index scans, and by sequential scans).
		if err := tx.QueryRow(ctx, readRows).Scan(&read); err != nil {
			return err
		}
		read -= before
		return nil
	})
	require.NoError(t, err)
	t.Logf("building the request: %d statements returning %d rows, %d rows read", statements, rows, read)

	// The request: the summary in the system prompt, then the four messages after it and the
	// run's own.
	require.Contains(t, req.System, "The user counted messages.")
	require.Len(t, req.Messages, 5)
	require.Equal(t, "and the next one?", req.Messages[4].Blocks[0].Text)
	require.True(t, strings.HasPrefix(req.Messages[0].Blocks[0].Text, "message number 1997"), req.Messages[0].Blocks[0].Text)

	// Bounded: settings, conversation, window, tool calls, newer messages, tasks, memories.
	require.LessOrEqual(t, statements, int64(10), "statements")
	require.LessOrEqual(t, rows, int64(20), "rows returned")
	require.LessOrEqual(t, read, int64(50), "rows read (pg_stat_xact_user_tables)")

	// A job retried before it acquired the run works the run's first attempt: its acquisition's
	// batch holds the settings and the conversation alone, and the state is read after it.
	err = d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: runID})
		if err != nil {
			return err
		}
		tr := &attempt{e: e, job: Attempt{Number: 2}}
		first := tr.firstReads(ctx, tenantID, runID)
		var b pgx.Batch
		first.Queue(&b)
		require.Equal(t, 2, b.Len(), "the settings and the conversation")
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		if err := first.Then(ctx, tx, run.Lease{Run: r, Attempt: 1}); err != nil {
			return err
		}
		require.NotNil(t, tr.first, "the state is read after the batch")
		require.Equal(t, want, *tr.first)
		require.Equal(t, convID, tr.conv.ID)
		return nil
	})
	require.NoError(t, err)
}
