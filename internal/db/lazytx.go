package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a transaction that begins with its first statement: BEGIN, the scope's set_config
// and that statement (or batch) go to Postgres together (pgx's Batch.BeginTx), which saves the
// round trip BEGIN would wait for alone. A transaction that runs nothing sends nothing.
type lazyTx struct {
	c *pgxpool.Conn
	// scope is the set_config statement and its argument, run right after BEGIN.
	scope    string
	scopeArg any
	tx       pgx.Tx // nil until begun
	closed   bool
	// ended is set when a batch ended the transaction with its COMMIT (Tx.CommitWith);
	// endErr is that commit's outcome.
	ended  bool
	endErr error
	// early makes CommitWith's batch come back before its COMMIT's outcome (InTxEarly);
	// pending, once that batch is sent, reads the outcome (settle).
	early   bool
	pending func() error
}

// settle waits for the outcome of a commit that is on its way, reading it in the caller's
// goroutine: whoever needs the outcome first is woken by its arrival, with no hand-off.
func (t *lazyTx) settle() {
	if read := t.pending; read != nil {
		t.pending = nil
		t.over(read())
	}
}

// over records that a batch sent COMMIT and got past it: the transaction is over, committed
// unless err says otherwise. Commit reports err and sends nothing more.
func (t *lazyTx) over(err error) { t.ended, t.endErr = true, err }

// finished reports whether no statement may run any more: the transaction was committed or
// rolled back.
func (t *lazyTx) finished() bool { return t.closed || t.pending != nil || t.ended }

func newLazyTx(c *pgxpool.Conn, tenantID string, system bool) *lazyTx {
	if system {
		return &lazyTx{c: c, scope: "SELECT set_config('app.system', $1, true)", scopeArg: "on"}
	}
	return &lazyTx{c: c, scope: "SELECT set_config('app.tenant_id', $1, true)", scopeArg: tenantID}
}

// send sends b's queries after BEGIN and the scope, and returns the results of b's queries.
func (t *lazyTx) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	all := &pgx.Batch{}
	all.BeginTx(pgx.TxOptions{})
	all.Queue(t.scope, t.scopeArg)
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	br := t.c.SendBatch(ctx, all)
	t.tx = br.Tx()
	if _, err := br.Exec(); err != nil { // BEGIN
		return failed(br, b, err)
	}
	if _, err := br.Exec(); err != nil { // the scope
		return failed(br, b, err)
	}
	return br
}

func failed(br pgx.BatchResults, b *pgx.Batch, err error) pgx.BatchResults {
	_ = br.Close()
	return pgx.FailedBatchResults(b, err)
}

// begin begins the transaction on its own (before a savepoint, a COPY or a prepare).
func (t *lazyTx) begin(ctx context.Context) error {
	if t.finished() {
		return pgx.ErrTxClosed
	}
	if t.tx != nil {
		return nil
	}
	return t.send(ctx, &pgx.Batch{}).Close()
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.finished() {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if t.tx != nil {
		return t.tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.finished() {
		return &bufRows{err: pgx.ErrTxClosed}, pgx.ErrTxClosed
	}
	if t.tx != nil {
		return t.tx.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return &bufRows{err: err}, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil && !t.finished() {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.finished() {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	if t.tx != nil {
		return t.tx.SendBatch(ctx, b)
	}
	return t.send(ctx, b)
}

func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.tx.Begin(ctx)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.tx.CopyFrom(ctx, table, columns, src)
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.tx.Prepare(ctx, name, sql)
}

// LargeObjects needs a begun transaction; none of agentry's code uses them.
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	if t.tx == nil {
		panic("db: LargeObjects before the transaction's first statement")
	}
	return t.tx.LargeObjects()
}

func (t *lazyTx) Conn() *pgx.Conn { return t.c.Conn() }

// Commit commits (nothing to do when no statement ran) and gives the connection back.
func (t *lazyTx) Commit(ctx context.Context) error {
	return t.end(func() error { return t.tx.Commit(ctx) })
}

// Rollback rolls back (nothing to do when no statement ran) and gives the connection back.
func (t *lazyTx) Rollback(ctx context.Context) error {
	return t.end(func() error { return t.tx.Rollback(ctx) })
}

func (t *lazyTx) end(fn func() error) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	t.settle()
	var err error
	switch {
	case t.ended:
		err = t.endErr // Commit and Rollback alike: nothing is left to end
	case t.tx != nil:
		err = fn()
	}
	t.c.Release()
	return err
}

// batchRows closes its batch with the rows (or when they are read to the end, as pgx closes
// rows then, so the connection is free for the next statement).
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.br == nil {
		return
	}
	r.Rows.Close()
	r.err = r.br.Close()
	r.br = nil
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is pgx's QueryRow over rows: the first row, or ErrNoRows.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
