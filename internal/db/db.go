// Package db owns agentry's Postgres access: the connection pool, the one transaction helper that
// scopes every statement to a tenant (row-level security), migrations, and the sqlc queries in
// dbsqlc.
package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// DB is the application's handle on Postgres. Its pool runs as the application role, so every
// tenant-owned row is filtered by row-level security.
type DB struct {
	Pool *pgxpool.Pool
	Q    *dbsqlc.Queries
	log  *slog.Logger
}

// Open connects a pool to url. When role is not empty every connection switches to it (SET ROLE)
// before use, so the process works with the privileges of the application role whatever user
// the URL names.
func Open(ctx context.Context, url, role string, log *slog.Logger) (*DB, error) {
	return open(ctx, url, role, log, false)
}

// OpenQueue opens the pool River's own statements run on (fetching, completing and
// rescheduling jobs, its maintenance), like Open but with synchronous_commit off: their commits
// do not wait for the WAL flush. Everything they write is River's bookkeeping that the next
// synchronous commit of any session makes durable with it (WAL is flushed in order), and a
// Postgres crash before that only puts a job back a step (fetched again, or rescued and run
// again, which a run's lease and its terminal state make harmless). A chat turn's job is
// inserted in the turn's own transaction (Open's pool), which stays synchronous, and so does
// everything of agentry's. One WAL flush fewer between a message and its first token.
func OpenQueue(ctx context.Context, url, role string, log *slog.Logger) (*DB, error) {
	return open(ctx, url, role, log, true)
}

func open(ctx context.Context, url, role string, log *slog.Logger, asyncCommit bool) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if asyncCommit {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		registerUUID(c.TypeMap())
		if role == "" {
			return nil
		}
		if err := dbsqlc.New(c).TxSetRole(ctx, role); err != nil {
			return fmt.Errorf("set role %s (run `agentry migrate` first): %w", role, err)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return &DB{Pool: pool, Q: dbsqlc.New(pool), log: log}, nil
}

// Close closes the pool.
func (d *DB) Close() { d.Pool.Close() }

// AutovacuumOn reports whether the server runs autovacuum. Without it no table is ever
// analyzed: a plan a connection cached while a table was small stays after the table has grown
// (River's completer then reads all of river_job twice per batch), and dead rows and GIN pending
// lists are cleaned by the statements that meet them.
func AutovacuumOn(ctx context.Context, q dbsqlc.DBTX) (bool, error) {
	var on bool
	err := q.QueryRow(ctx, "SELECT current_setting('autovacuum')::boolean").Scan(&on)
	return on, err
}

// Tx is one transaction scoped to a tenant (TenantID) or, in a system transaction, to every
// tenant (TenantID is uuid.Nil). Q runs the generated queries inside it.
type Tx struct {
	pgx.Tx
	Q        *dbsqlc.Queries
	TenantID uuid.UUID
	system   bool
	root     *Tx
	after    []afterItem
	batches  map[any]*commitBatch
	flushes  []*commitBatch
	atCommit []func(ctx context.Context, tx *Tx) error
}

// AtCommit registers fn as a last statement of the outermost transaction: once its function
// has returned nil, the functions registered run as CommitWith's do (one statement each at
// most, in the order registered), so their statements go to Postgres with the COMMIT. A write
// nothing else in the transaction reads, such as an event append or a budget reservation,
// costs no round trip of its own this way, and a row lock it takes is held only while Postgres
// commits. A function registered inside a savepoint that rolls back does not run.
func (t *Tx) AtCommit(fn func(ctx context.Context, tx *Tx) error) {
	r := t.rootTx()
	r.atCommit = append(r.atCommit, fn)
}

// afterItem is what runs after the commit, in registration order: fn, or an item added to the
// batch named key.
type afterItem struct {
	fn   func()
	key  any
	item any
}

// AfterCommit registers fn to run once the outermost transaction has committed (never when it
// rolls back). Events are published to Redis this way: only what Postgres holds goes out.
func (t *Tx) AfterCommit(fn func()) {
	r := t.rootTx()
	r.after = append(r.after, afterItem{fn: fn})
}

func (t *Tx) rootTx() *Tx {
	if t.root != nil {
		return t.root
	}
	return t
}

// commitBatch is what AfterCommitBatch gathered under one key.
type commitBatch struct {
	key   any
	items []any
	flush func(items []any)
}

// AfterCommitBatch adds item to the batch named key. Once the outermost transaction has
// committed, after every AfterCommit function, flush (that of the first call for key) gets the
// batch's items in the order they were added; items added inside a savepoint that rolled back
// are left out, as AfterCommit functions are. The event publisher gathers a transaction's events
// this way into one Redis message.
func (t *Tx) AfterCommitBatch(key any, item any, flush func(items []any)) {
	r := t.rootTx()
	r.batch(key, flush)
	r.after = append(r.after, afterItem{key: key, item: item})
}

// batch registers the batch named key with its flush, unless it is registered already.
func (t *Tx) batch(key any, flush func(items []any)) {
	if t.batches[key] != nil {
		return
	}
	if t.batches == nil {
		t.batches = map[any]*commitBatch{}
	}
	b := &commitBatch{key: key, flush: flush}
	t.batches[key] = b
	t.flushes = append(t.flushes, b)
}

type txKey struct{}

type guardKey struct{}

// WithCommitGuard returns ctx with guard, which every outermost transaction run with it asks
// just before it commits: an error from guard rolls the transaction back and is its error. A
// check that needs a round trip of its own (the rate limiter's, in Redis) can so run at the
// same time as the transaction's statements instead of before them, and still decide whether
// anything is committed. guard may be called more than once and must give the same answer.
func WithCommitGuard(ctx context.Context, guard func() error) context.Context {
	return context.WithValue(ctx, guardKey{}, guard)
}

// guarded asks ctx's commit guard, if any.
func guarded(ctx context.Context) error {
	if g, ok := ctx.Value(guardKey{}).(func() error); ok && g != nil {
		return g()
	}
	return nil
}

// Detach returns ctx without its transaction and commit guard: work that runs after a commit
// (AfterCommit) and needs a transaction of its own begins one instead of a savepoint of the
// transaction that is over.
func Detach(ctx context.Context) context.Context {
	return context.WithValue(context.WithValue(ctx, txKey{}, (*Tx)(nil)), guardKey{}, (func() error)(nil))
}

// TxFrom returns the transaction ctx runs in, if any.
func TxFrom(ctx context.Context) (*Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*Tx)
	return tx, ok && tx != nil
}

// InTx runs fn in a transaction scoped to tenantID: row-level security admits only that tenant's
// rows. An error from fn (or a panic) rolls back. Called inside another transaction of the same
// tenant (found in ctx) it nests as a savepoint.
func (d *DB) InTx(ctx context.Context, tenantID uuid.UUID, fn func(ctx context.Context, tx *Tx) error) error {
	if tenantID == uuid.Nil {
		return errors.New("db: transaction without a tenant")
	}
	return d.run(ctx, tenantID, false, fn)
}

// InSystemTx runs fn in a transaction that sees every tenant's rows. It exists for the few paths
// that must find a tenant from a credential (API keys, refresh tokens, login) and for background
// sweeps; reason says which, and is logged at debug level.
func (d *DB) InSystemTx(ctx context.Context, reason string, fn func(ctx context.Context, tx *Tx) error) error {
	if reason == "" {
		return errors.New("db: system transaction without a reason")
	}
	d.log.DebugContext(ctx, "system transaction", slog.String("reason", reason))
	return d.run(ctx, uuid.Nil, true, fn)
}

func (d *DB) run(ctx context.Context, tenantID uuid.UUID, system bool, fn func(ctx context.Context, tx *Tx) error) (err error) {
	return d.runWith(ctx, tenantID, system, fn, nil)
}

// runWith is run; commit, when set, commits an outermost transaction in place of finish
// (InTxEarly): it is not called for a savepoint, which its enclosing transaction commits.
func (d *DB) runWith(ctx context.Context, tenantID uuid.UUID, system bool, fn func(ctx context.Context, tx *Tx) error, commit func(tx *Tx)) (err error) {
	if parent, ok := TxFrom(ctx); ok {
		if !parent.system && (system || parent.TenantID != tenantID) {
			return fmt.Errorf("db: nested transaction for tenant %s inside tenant %s", tenantID, parent.TenantID)
		}
		sp, err := parent.Begin(ctx)
		if err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		root := parent
		if parent.root != nil {
			root = parent.root
		}
		child := &Tx{Tx: sp, Q: parent.Q.WithTx(sp), TenantID: tenantID, system: parent.system, root: root}
		mark, markAt := len(root.after), len(root.atCommit)
		err = finish(ctx, child, fn)
		if err != nil {
			// What a rolled-back savepoint registered never happened.
			root.after, root.atCommit = root.after[:mark], root.atCommit[:markAt]
		}
		return err
	}
	c, err := d.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// BEGIN and the scope go with the transaction's first statement (lazyTx). They come first
	// in its batch, and a failure of either skips the rest of the batch (one Sync ends it), so
	// no statement can run in a transaction that is not scoped.
	ltx := newLazyTx(c, tenantID.String(), system)
	ltx.early = commit != nil
	return finishWith(ctx, &Tx{Tx: ltx, Q: d.Q.WithTx(ltx), TenantID: tenantID, system: system}, fn, commit)
}

// InTxEarly is InTx for a caller with work that need not wait for the commit's WAL flush,
// only for its outcome before anything depends on it: it returns once Postgres has run the
// transaction's last statements (its AtCommit functions, whose results come back before the
// COMMIT runs) and sends the COMMIT without waiting for it. confirm waits for the commit's
// outcome (the error InTx would have returned) and may be called any number of times; what
// the transaction registered with AfterCommit runs before confirm returns nil. Until then the
// transaction's row locks are held, so other transactions see its writes only once it has
// committed. The worker acquiring a chat turn sends the turn's first model request this way
// while its acquisition commits. Nested in another transaction, it is InTx (a savepoint) and
// confirm reports nil.
//
// The caller must call confirm at least once: its first call reads the commit's outcome, gives
// the connection back and runs what the transaction registered with AfterCommit, in the
// caller's goroutine when its context cannot end (context.WithoutCancel: the caller that needs
// the commit first goes on with no hand-off from another goroutine; a chat turn's worker is
// that caller), else in a goroutine of its own that it waits for. Later calls wait for it.
func (d *DB) InTxEarly(ctx context.Context, tenantID uuid.UUID, fn func(ctx context.Context, tx *Tx) error) (confirm func(context.Context) error, err error) {
	if tenantID == uuid.Nil {
		return nil, errors.New("db: transaction without a tenant")
	}
	var committing *Tx
	err = d.runWith(ctx, tenantID, false, fn, func(tx *Tx) { committing = tx })
	if err != nil {
		return nil, err
	}
	if committing == nil {
		return func(context.Context) error { return nil }, nil // a savepoint: the enclosing transaction commits it
	}
	var (
		mu        sync.Mutex
		started   bool
		done      = make(chan struct{})
		commitErr error
	)
	finish := func() {
		defer close(done)
		if err := committing.Commit(context.WithoutCancel(ctx)); err != nil {
			commitErr = fmt.Errorf("commit: %w", err)
			return
		}
		committing.runAfter()
	}
	return func(ctx context.Context) error {
		mu.Lock()
		first := !started
		started = true
		mu.Unlock()
		if first {
			if ctx.Done() == nil {
				finish()
				return commitErr
			}
			go finish() // the caller may stop waiting: the outcome must be read all the same
		}
		select {
		case <-done:
			return commitErr
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, nil
}

func finish(ctx context.Context, tx *Tx, fn func(ctx context.Context, tx *Tx) error) (err error) {
	return finishWith(ctx, tx, fn, nil)
}

// finishWith is finish; when commit is set, it commits an outermost transaction in finish's
// place once fn and the statements that go with the COMMIT succeeded (InTxEarly).
func finishWith(ctx context.Context, tx *Tx, fn func(ctx context.Context, tx *Tx) error, commit func(tx *Tx)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	ctx = context.WithValue(ctx, txKey{}, tx)
	err = fn(ctx, tx)
	if err == nil && tx.root == nil {
		err = guarded(ctx)
	}
	if err == nil && tx.root == nil && len(tx.atCommit) > 0 {
		err = tx.CommitWith(ctx, tx.atCommit...)
	}
	if lt, ok := tx.Tx.(*lazyTx); err != nil && ok && tx.root == nil {
		lt.settle()
		if lt.ended && lt.endErr == nil {
			// Committed (by fn's CommitWith or the AtCommit functions'), then a function
			// failed after its statement: what Postgres holds goes out (AfterCommit), and the
			// caller gets the error.
			_ = tx.Commit(ctx)
			tx.runAfter()
			return err
		}
	}
	if err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
	}
	if commit != nil && tx.root == nil {
		commit(tx)
		return nil
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tx.root == nil {
		tx.runAfter()
	}
	return nil
}

// runAfter runs what the committed transaction registered to run after its commit.
func (tx *Tx) runAfter() {
	for _, a := range tx.after {
		if a.fn != nil {
			a.fn()
		} else {
			b := tx.batches[a.key]
			b.items = append(b.items, a.item)
		}
	}
	for _, b := range tx.flushes {
		if len(b.items) > 0 {
			b.flush(b.items)
		}
	}
}

// IsNoRows reports whether err means a query found nothing.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// IsUniqueViolation reports whether err is a unique-constraint violation, optionally of the
// named constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && (constraint == "" || pgErr.ConstraintName == constraint)
}

// IsCheckViolation reports whether err is a CHECK-constraint violation and names the constraint.
func IsCheckViolation(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		return pgErr.ConstraintName, true
	}
	return "", false
}
