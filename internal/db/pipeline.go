package db

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Pipeline runs fns at the same time inside t, each with a view of t (the *Tx it is given)
// whose statements are sent together with the others': a statement waits until every fn
// still running has one waiting too (or has returned), and then all of them go to Postgres as
// one batch, in the order of fns, which is one round trip instead of one per statement. A
// transaction's independent reads (a run's settings, conversation, history and tool calls)
// cost one round trip this way, and each fn stays plain sequential code on the generated
// queries.
//
// A fn must run its statements one at a time (no goroutines of its own on the view) and must
// not wait for another fn. Pipeline inside a fn runs its own fns in that fn's place: they join
// the same batches. A view has no savepoints (Begin fails) and cannot commit. A failed
// statement aborts the transaction, as it would run alone: the statements after it fail too.
// What fns register with AfterCommit, AfterCommitBatch and AtCommit is added to t in the order
// of fns, whatever the order they ran in. Pipeline returns the error of the first statement that
// failed (the cause; the statements after it fail as aborted), else the first error of fns in
// their order; a panic of a fn panics again in the caller once every fn has returned.
func (t *Tx) Pipeline(ctx context.Context, fns ...func(ctx context.Context, tx *Tx) error) error {
	switch len(fns) {
	case 0:
		return nil
	case 1:
		return fns[0](ctx, t)
	}
	if pt, nested := t.Tx.(*pipeTx); nested {
		pt.p.spawn(len(fns))
		defer pt.p.resume()
		return pt.p.run(ctx, t, pt.key, fns)
	}
	p := &pipeline{tx: t.Tx, running: len(fns)}
	return p.run(ctx, t, nil, fns)
}

// CommitWith runs fns like Pipeline as t's last statements and commits t in the same round
// trip: COMMIT goes at the end of the batch that carries their statements, so a transaction
// pays no round trip of its own to commit (and row locks taken by those statements are held
// for no longer than Postgres takes to run and commit them). A failed statement skips the
// COMMIT (one Sync ends the batch): t is left to roll back, as with Pipeline. Each fn runs at
// most one statement (a second fails: the transaction is over by then), and nothing can run in
// t after CommitWith; the caller returns at once and the commit that follows only reports the
// outcome. What a fn returns after its statement cannot undo the commit, so checks that must
// roll back belong in the statement. Inside a savepoint or a Pipeline function, where t cannot
// commit, CommitWith is Pipeline.
func (t *Tx) CommitWith(ctx context.Context, fns ...func(ctx context.Context, tx *Tx) error) error {
	lt, ok := t.Tx.(*lazyTx)
	if !ok || t.root != nil || len(fns) == 0 {
		return t.Pipeline(ctx, fns...)
	}
	if err := guarded(ctx); err != nil {
		return err
	}
	p := &pipeline{tx: t.Tx, running: len(fns), commit: lt}
	return p.run(ctx, t, nil, fns)
}

// run runs fns on views of t whose statements go through p (the first in this goroutine),
// waits for them and adds what they registered to run after the commit to t, in their order.
// key orders the views' statements in a batch (fns of a nested Pipeline take the place of the
// function that called it).
func (p *pipeline) run(ctx context.Context, t *Tx, key []int, fns []func(ctx context.Context, tx *Tx) error) error {
	views := make([]*Tx, len(fns))
	errs := make([]error, len(fns))
	panics := make([]any, len(fns))
	one := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				panics[i] = fmt.Sprintf("%v\n(in db.Tx.Pipeline function %d)\n%s", r, i, debug.Stack())
			}
			p.done(ctx)
		}()
		errs[i] = fns[i](context.WithValue(ctx, txKey{}, views[i]), views[i])
	}
	for i := range fns {
		ptx := &pipeTx{Tx: p.tx, p: p, key: append(slices.Clone(key), i)}
		views[i] = &Tx{Tx: ptx, Q: t.Q.WithTx(ptx), TenantID: t.TenantID, system: t.system}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(fns); i++ {
		wg.Go(func() { one(i) })
	}
	one(0)
	wg.Wait()
	for _, r := range panics {
		if r != nil {
			panic(r)
		}
	}
	root := t.rootTx()
	for _, v := range views {
		for _, b := range v.flushes {
			root.batch(b.key, b.flush)
		}
		root.after = append(root.after, v.after...)
		root.atCommit = append(root.atCommit, v.atCommit...)
	}
	p.mu.Lock()
	cause := p.failed
	p.mu.Unlock()
	if cause != nil {
		return cause
	}
	return firstError(errs)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pipeline gathers the statements of a Pipeline's functions. No goroutine coordinates them:
// the function whose statement (or return) completes a round sends the round's batch.
type pipeline struct {
	tx pgx.Tx
	mu sync.Mutex
	// running counts the functions not returned yet; blocked, those of them waiting for a
	// Pipeline of their own to end; waiting, the statements of the others.
	running, blocked int
	waiting          []*pipeCall
	// failed is the error of the first statement that failed.
	failed error
	// sending serialises batches on the connection: a function may start the next round
	// while the last results of the previous one are still being read.
	sending sync.Mutex
	// commit is the transaction CommitWith commits with the first batch; committed is set
	// once that batch is on its way (later statements fail).
	commit    *lazyTx
	committed bool
}

// errAfterCommit is the error of a statement of a CommitWith function after the commit.
var errAfterCommit = errors.New("db: statement after CommitWith's commit (one statement per function)")

// add queues c and, when it completes the round, sends the round. It reports false, queuing
// nothing, after CommitWith's commit.
func (p *pipeline) add(ctx context.Context, c *pipeCall) bool {
	p.mu.Lock()
	if p.committed {
		p.mu.Unlock()
		return false
	}
	p.waiting = append(p.waiting, c)
	p.flushLocked(ctx)
	return true
}

// done is told that a function returned; the others may all be waiting.
func (p *pipeline) done(ctx context.Context) {
	p.mu.Lock()
	p.running--
	p.flushLocked(ctx)
}

// spawn is told that a function runs a nested Pipeline of n functions and waits for it.
func (p *pipeline) spawn(n int) {
	p.mu.Lock()
	p.running += n
	p.blocked++
	p.mu.Unlock()
}

// resume is told that the nested Pipeline ended.
func (p *pipeline) resume() {
	p.mu.Lock()
	p.blocked--
	p.mu.Unlock()
}

// flushLocked sends the waiting statements when every running function has one; it unlocks
// p.mu.
func (p *pipeline) flushLocked(ctx context.Context) {
	if len(p.waiting) == 0 || len(p.waiting) != p.running-p.blocked {
		p.mu.Unlock()
		return
	}
	calls := p.waiting
	p.waiting = nil
	commit := p.commit != nil && !p.committed
	p.committed = p.committed || commit
	// p.mu is let go before waiting for the batch being sent: send takes p.mu once its batch
	// is read, and a function handed its result early may queue the next round meanwhile
	// (taking sending under mu deadlocked both). No other round can form before this one is
	// sent (its functions wait for their results), so the rounds still go in order.
	p.mu.Unlock()
	p.sending.Lock()
	defer p.sending.Unlock()
	p.send(ctx, calls, commit)
}

type pipeKind int

const (
	pipeExec pipeKind = iota
	pipeQuery
)

// pipeCall is one statement of a function, waiting for its batch.
type pipeCall struct {
	key  []int
	kind pipeKind
	sql  string
	args []any
	res  chan pipeResult
}

type pipeResult struct {
	tag  pgconn.CommandTag
	rows *bufRows
	err  error
}

// onPipelineBatch, when set (tests), is told the size of every batch a Pipeline sends.
var onPipelineBatch func(statements int)

// send sends calls as one batch (with COMMIT after them when commit is set) and hands each its
// result, in the order of the functions. Rows are read whole here (the batch's results must be
// read in order), so no function waits for another's to be read.
func (p *pipeline) send(ctx context.Context, calls []*pipeCall, commit bool) {
	slices.SortFunc(calls, func(a, b *pipeCall) int { return slices.Compare(a.key, b.key) })
	if onPipelineBatch != nil {
		onPipelineBatch(len(calls))
	}
	if commit && p.commit.early && p.commit.tx != nil {
		p.sendEarly(ctx, calls)
		return
	}
	b := &pgx.Batch{}
	for _, c := range calls {
		b.Queue(c.sql, c.args...)
	}
	if commit {
		b.Queue("COMMIT")
	}
	br := p.tx.SendBatch(ctx, b)
	for _, c := range calls {
		var r pipeResult
		if c.kind == pipeExec {
			r.tag, r.err = br.Exec()
		} else if rows, err := br.Query(); err != nil {
			r.err = err
		} else {
			r.rows = readRows(rows)
			r.err = r.rows.err
		}
		if r.err != nil {
			p.mu.Lock()
			if p.failed == nil {
				p.failed = r.err
			}
			p.mu.Unlock()
		}
		if !commit {
			c.res <- r
		} else {
			defer func() { c.res <- r }() // once the commit's outcome is known
		}
	}
	var commitErr error
	if commit {
		var tag pgconn.CommandTag
		if tag, commitErr = br.Exec(); commitErr == nil && tag.String() == "ROLLBACK" {
			commitErr = pgx.ErrTxCommitRollback
		}
	}
	err := br.Close()
	p.mu.Lock()
	if p.failed == nil && err != nil && !commit {
		p.failed = err
	}
	if commit && p.failed == nil {
		// No statement failed, so the batch reached its COMMIT: the transaction is over,
		// committed unless commitErr says otherwise.
		p.commit.over(errors.Join(commitErr, err))
	}
	p.mu.Unlock()
}

// sendEarly is send for the commit batch of a transaction begun by InTxEarly: the statements,
// a Sync, COMMIT and a second Sync go to Postgres in one write, so Postgres answers the
// statements before it runs the COMMIT (at the first Sync) and their results come back
// without waiting for the commit's WAL flush. Each function gets its result at once; the
// COMMIT's outcome is read by whoever settles the transaction first (lazyTx.settle: InTxEarly's
// confirm), which ends it. A failed statement aborts the transaction, so the COMMIT after it
// rolls back: that is read here, before returning, as send leaves the transaction over when a
// statement fails.
func (p *pipeline) sendEarly(ctx context.Context, calls []*pipeCall) {
	lt := p.commit
	conn := lt.c.Conn()
	fail := func(err error) {
		p.mu.Lock()
		if p.failed == nil {
			p.failed = err
		}
		p.mu.Unlock()
		for _, c := range calls {
			c.res <- pipeResult{err: err, rows: &bufRows{err: err}}
		}
	}
	// The statements are sent as prepared ones (pgconn has no statement cache of its own):
	// preparing one costs a round trip the first time a connection runs it, then nothing.
	qbs := make([]pgx.ExtendedQueryBuilder, len(calls))
	sds := make([]*pgconn.StatementDescription, len(calls))
	for i, c := range calls {
		sd, err := conn.Prepare(ctx, c.sql, c.sql)
		if err == nil {
			err = qbs[i].Build(conn.TypeMap(), sd, c.args)
		}
		if err != nil {
			fail(err) // nothing was sent: the transaction is open, and the caller rolls it back
			return
		}
		sds[i] = sd
	}
	// The commit is not the caller's to cancel once it is on its way: its outcome must be read.
	pl := conn.PgConn().StartPipeline(context.WithoutCancel(ctx))
	for i := range calls {
		pl.SendQueryStatement(sds[i], qbs[i].ParamValues, qbs[i].ParamFormats, qbs[i].ResultFormats)
	}
	pl.SendPipelineSync()
	pl.SendQueryParams("COMMIT", nil, nil, nil, nil)
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		lt.over(fmt.Errorf("commit outcome unknown: %w", err))
		fail(err)
		return
	}
	var failed error
	results := make([]pipeResult, len(calls))
	for i := range calls {
		if failed != nil {
			results[i] = pipeResult{err: failed, rows: &bufRows{err: failed}}
			continue
		}
		res, err := pl.GetResults()
		rr, ok := res.(*pgconn.ResultReader)
		if err == nil && !ok {
			err = fmt.Errorf("db: unexpected pipeline result %T", res)
		}
		if err != nil {
			failed = err
			results[i] = pipeResult{err: err, rows: &bufRows{err: err}}
			continue
		}
		r := &bufRows{fields: slices.Clone(rr.FieldDescriptions()), conn: conn}
		for rr.NextRow() {
			r.rows = append(r.rows, cloneRow(rr.Values()))
		}
		r.tag, r.err = rr.Close()
		if r.err != nil {
			failed = r.err
		}
		results[i] = pipeResult{tag: r.tag, rows: r, err: r.err}
	}
	commitOutcome := func() error {
		res, err := pl.GetResults()
		if err == nil {
			if _, ok := res.(*pgconn.PipelineSync); !ok {
				err = fmt.Errorf("db: unexpected pipeline result %T", res)
			}
		}
		var tag pgconn.CommandTag
		if err == nil {
			if res, err = pl.GetResults(); err == nil {
				if rr, ok := res.(*pgconn.ResultReader); ok {
					tag, err = rr.Close()
				} else {
					err = fmt.Errorf("db: unexpected pipeline result %T", res)
				}
			}
		}
		if err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
		return errors.Join(err, pl.Close())
	}
	if failed != nil {
		p.mu.Lock()
		if p.failed == nil {
			p.failed = failed
		}
		p.mu.Unlock()
		var pgErr *pgconn.PgError
		if errors.As(failed, &pgErr) {
			// Postgres skipped to the first Sync and rolled the transaction back at the COMMIT.
			_ = commitOutcome()
			lt.over(errRolledBack)
			if pgErr.Code == "0A000" {
				// "cached plan must not change result type" (a migration changed a table):
				// prepare the statements afresh next time.
				for _, c := range calls {
					_ = conn.Deallocate(context.WithoutCancel(ctx), c.sql)
				}
			}
		} else {
			// The connection failed: whether the COMMIT ran is not known.
			lt.over(fmt.Errorf("commit outcome unknown: %w", errors.Join(failed, pl.Close())))
		}
	} else {
		lt.pending = commitOutcome
	}
	for i, c := range calls {
		c.res <- results[i]
	}
}

// errRolledBack ends a transaction whose commit batch failed: Postgres rolled it back, so
// there is nothing left to roll back.
var errRolledBack = pgx.ErrTxClosed

// readRows reads rows whole into memory.
func readRows(rows pgx.Rows) *bufRows {
	r := &bufRows{fields: slices.Clone(rows.FieldDescriptions()), conn: rows.Conn()}
	for rows.Next() {
		r.rows = append(r.rows, cloneRow(rows.RawValues()))
	}
	rows.Close()
	r.tag, r.err = rows.CommandTag(), rows.Err()
	return r
}

// cloneRow copies a row's raw values out of the connection's buffer (nil stays NULL).
func cloneRow(raw [][]byte) [][]byte {
	row := make([][]byte, len(raw))
	for i, v := range raw {
		if v != nil {
			row[i] = slices.Clone(v)
		}
	}
	return row
}

// pipeTx is a Pipeline function's view of the transaction: its statements go through the
// pipeline.
type pipeTx struct {
	pgx.Tx
	p   *pipeline
	key []int
}

var errPipeline = errors.New("db: not available inside Pipeline")

func (t *pipeTx) call(ctx context.Context, kind pipeKind, sql string, args []any) *pipeCall {
	if ctx.Err() != nil {
		return nil
	}
	c := &pipeCall{key: t.key, kind: kind, sql: sql, args: args, res: make(chan pipeResult, 1)}
	if !t.p.add(ctx, c) {
		c.res <- pipeResult{err: errAfterCommit, rows: &bufRows{err: errAfterCommit}}
	}
	return c
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c := t.call(ctx, pipeExec, sql, args)
	if c == nil {
		return pgconn.CommandTag{}, ctx.Err()
	}
	r := <-c.res
	return r.tag, r.err
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c := t.call(ctx, pipeQuery, sql, args)
	if c == nil {
		return &bufRows{err: ctx.Err()}, ctx.Err()
	}
	r := <-c.res
	if r.rows == nil {
		return &bufRows{err: r.err}, r.err
	}
	return r.rows, r.err
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

func (t *pipeTx) Begin(context.Context) (pgx.Tx, error) { return nil, errPipeline }
func (t *pipeTx) Commit(context.Context) error          { return errPipeline }
func (t *pipeTx) Rollback(context.Context) error        { return errPipeline }
func (t *pipeTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	panic(errPipeline)
}
func (t *pipeTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errPipeline
}
func (t *pipeTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, errPipeline
}

// bufRows are rows read whole (readRows), scanned like pgx's.
type bufRows struct {
	fields []pgconn.FieldDescription
	rows   [][][]byte
	next   int
	tag    pgconn.CommandTag
	err    error
	conn   *pgx.Conn
}

func (r *bufRows) Close()                                       { r.next = len(r.rows) + 1 }
func (r *bufRows) Err() error                                   { return r.err }
func (r *bufRows) CommandTag() pgconn.CommandTag                { return r.tag }
func (r *bufRows) FieldDescriptions() []pgconn.FieldDescription { return r.fields }
func (r *bufRows) Conn() *pgx.Conn                              { return r.conn }
func (r *bufRows) TypeMap() *pgtype.Map                         { return r.conn.TypeMap() }

func (r *bufRows) Next() bool {
	if r.err != nil || r.next >= len(r.rows) {
		r.next = len(r.rows) + 1
		return false
	}
	r.next++
	return true
}

func (r *bufRows) RawValues() [][]byte {
	if r.next < 1 || r.next > len(r.rows) {
		return nil
	}
	return r.rows[r.next-1]
}

func (r *bufRows) Scan(dest ...any) error {
	raw := r.RawValues()
	if raw == nil {
		return errors.New("db: Scan without a current row")
	}
	return pgx.ScanRow(r.TypeMap(), r.fields, raw, dest...)
}

func (r *bufRows) Values() ([]any, error) {
	raw := r.RawValues()
	if raw == nil {
		return nil, errors.New("db: Values without a current row")
	}
	m := r.TypeMap()
	out := make([]any, len(raw))
	for i, fd := range r.fields {
		if raw[i] == nil {
			continue
		}
		if dt, ok := m.TypeForOID(fd.DataTypeOID); ok {
			v, err := dt.Codec.DecodeValue(m, fd.DataTypeOID, fd.Format, raw[i])
			if err != nil {
				return nil, err
			}
			out[i] = v
		} else if fd.Format == pgx.TextFormatCode {
			out[i] = string(raw[i])
		} else {
			out[i] = raw[i]
		}
	}
	return out, nil
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
