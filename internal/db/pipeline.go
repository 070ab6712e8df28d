package db

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// What fns register with AfterCommit and AfterCommitBatch is added to t in the order of fns,
// whatever the order they ran in. Pipeline returns the first error of fns, in their order.
func (t *Tx) Pipeline(ctx context.Context, fns ...func(ctx context.Context, tx *Tx) error) error {
	if len(fns) == 1 {
		return fns[0](ctx, t)
	}
	if pt, nested := t.Tx.(*pipeTx); nested {
		pt.p.ev <- pipeEvent{spawn: len(fns)}
		err := pt.p.run(ctx, t, pt.key, fns)
		pt.p.ev <- pipeEvent{resume: true}
		return err
	}
	p := &pipeline{tx: t.Tx, ev: make(chan pipeEvent)}
	finished := make(chan error, 1)
	go func() { finished <- p.run(ctx, t, nil, fns) }()
	// Participants: functions not returned yet; blocked: those waiting for a Pipeline of
	// their own to end.
	var waiting []*pipeCall
	for running, blocked := len(fns), 0; running > 0; {
		switch e := <-p.ev; {
		case e.call != nil:
			waiting = append(waiting, e.call)
		case e.done:
			running--
		case e.spawn > 0:
			running += e.spawn
			blocked++
		case e.resume:
			blocked--
		}
		if len(waiting) > 0 && len(waiting) == running-blocked {
			p.send(ctx, waiting)
			waiting = waiting[:0]
		}
	}
	return <-finished
}

// run runs fns on views of t whose statements go through p, waits for them and adds what they
// registered to run after the commit to t, in their order. key orders the views' statements
// in a batch (fns of a nested Pipeline take the place of the function that called it).
func (p *pipeline) run(ctx context.Context, t *Tx, key []int, fns []func(ctx context.Context, tx *Tx) error) error {
	views := make([]*Tx, len(fns))
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		ptx := &pipeTx{Tx: p.tx, p: p, key: append(slices.Clone(key), i)}
		v := &Tx{Tx: ptx, Q: t.Q.WithTx(ptx), TenantID: t.TenantID, system: t.system}
		views[i] = v
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("db: pipeline function %d panicked: %v", i, r)
				}
				p.ev <- pipeEvent{done: true}
			}()
			errs[i] = fn(context.WithValue(ctx, txKey{}, v), v)
		}()
	}
	wg.Wait()
	root := t.rootTx()
	for _, v := range views {
		for _, b := range v.flushes {
			root.batch(b.key, b.flush)
		}
		root.after = append(root.after, v.after...)
	}
	return firstError(errs)
}

// pipeEvent is what a Pipeline's coordinator hears from its functions.
type pipeEvent struct {
	call   *pipeCall // a statement waiting for its batch
	done   bool      // a function returned
	spawn  int       // a function runs a Pipeline of this many functions and waits for it
	resume bool      // that Pipeline ended
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pipeline gathers the statements of a Pipeline's functions.
type pipeline struct {
	tx pgx.Tx
	ev chan pipeEvent
}

type pipeKind int

const (
	pipeExec pipeKind = iota
	pipeQuery
	pipeQueryRow
)

// pipeCall is one statement of a function, waiting for its batch.
type pipeCall struct {
	key  []int
	kind pipeKind
	sql  string
	args []any
	res  chan pipeResult
	// used is closed when the function has read the statement's rows (Query: Close;
	// QueryRow: Scan), so the next result of the batch can be read.
	used chan struct{}
}

type pipeResult struct {
	tag  pgconn.CommandTag
	rows pgx.Rows
	row  pgx.Row
	err  error
}

// onPipelineBatch, when set (tests), is told the size of every batch a Pipeline sends.
var onPipelineBatch func(statements int)

// send sends calls as one batch and hands each its result, in the order of the functions.
func (p *pipeline) send(ctx context.Context, calls []*pipeCall) {
	slices.SortFunc(calls, func(a, b *pipeCall) int { return slices.Compare(a.key, b.key) })
	if onPipelineBatch != nil {
		onPipelineBatch(len(calls))
	}
	b := &pgx.Batch{}
	for _, c := range calls {
		b.Queue(c.sql, c.args...)
	}
	br := p.tx.SendBatch(ctx, b)
	for _, c := range calls {
		switch c.kind {
		case pipeExec:
			tag, err := br.Exec()
			c.res <- pipeResult{tag: tag, err: err}
		case pipeQuery:
			rows, err := br.Query()
			if err != nil {
				c.res <- pipeResult{err: err}
				continue
			}
			c.res <- pipeResult{rows: rows}
			<-c.used
		case pipeQueryRow:
			c.res <- pipeResult{row: br.QueryRow()}
			<-c.used
		}
	}
	_ = br.Close() // a failed statement's error went to its function
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
	c := &pipeCall{key: t.key, kind: kind, sql: sql, args: args, res: make(chan pipeResult, 1), used: make(chan struct{})}
	select {
	case t.p.ev <- pipeEvent{call: c}:
	case <-ctx.Done():
		return nil
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
		return nil, ctx.Err()
	}
	r := <-c.res
	if r.err != nil {
		return nil, r.err
	}
	return &pipeRows{Rows: r.rows, used: c.used}, nil
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c := t.call(ctx, pipeQueryRow, sql, args)
	if c == nil {
		return errRow{ctx.Err()}
	}
	return &pipeRow{c: c}
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

// pipeRows lets the batch go on once the function closed its rows.
type pipeRows struct {
	pgx.Rows
	used chan struct{}
	once sync.Once
}

func (r *pipeRows) Close() {
	r.Rows.Close()
	r.once.Do(func() { close(r.used) })
}

// pipeRow waits for its batch when scanned.
type pipeRow struct{ c *pipeCall }

func (r *pipeRow) Scan(dest ...any) error {
	res := <-r.c.res
	defer close(r.c.used)
	return res.row.Scan(dest...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
