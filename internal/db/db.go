// Package db owns agentry's Postgres access: the connection pool, the one transaction helper that
// scopes every statement to a tenant (row-level security), migrations, and the sqlc queries in
// dbsqlc.
package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	// users is the pool of the transactions that act for a user (UserRole), Pool that of the
	// others (the application role): Postgres plans a prepared statement again whenever the
	// role it runs under changes, which a connection shared by both would do at every turn.
	// users is Pool in OpenQueue's handle (River acts for no user) and below minSplit.
	users *pgxpool.Pool
	role  string // the pool's role as a string literal: a savepoint that acts for no user takes it again
}

// UserRole is the role a transaction takes (SET LOCAL ROLE) while it acts for a user: the user
// policies apply to it alone, so the statements of transactions without a user (workers,
// periodic jobs) are planned without them. It has the application role's privileges; the
// migrations create it and grant it to the migrating user.
const UserRole = "agentry_app_user"

// Open connects a pool to url. When role is not empty every connection switches to it (SET ROLE)
// before use, so the process works with the privileges of the application role whatever user
// the URL names. Each of its two pools (transactions acting for a user, and the others) holds
// the URL's pool_max_conns connections at most, else 8; below minSplit they are one.
func Open(ctx context.Context, url, role string, log *slog.Logger, opts ...Option) (*DB, error) {
	return open(ctx, url, role, log, false, opts...)
}

// Option changes the pool's configuration before it opens.
type Option func(*pgxpool.Config)

// WithTracer traces every statement of the pool with t (pgx's QueryTracer: otelpgx).
func WithTracer(t pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = t }
}

// OpenQueue opens the pool River's own statements run on (fetching, completing and
// rescheduling jobs, its maintenance), like Open but with synchronous_commit off: their commits
// do not wait for the WAL flush. Everything they write is River's bookkeeping that the next
// synchronous commit of any session makes durable with it (WAL is flushed in order), and a
// Postgres crash before that only puts a job back a step (fetched again, or rescued and run
// again, which a run's lease and its terminal state make harmless). A chat turn's job is
// inserted in the turn's own transaction (Open's pool), which stays synchronous, and so does
// everything of agentry's. One WAL flush fewer between a message and its first token.
func OpenQueue(ctx context.Context, url, role string, log *slog.Logger, opts ...Option) (*DB, error) {
	return open(ctx, url, role, log, true, opts...)
}

// OpenTraced is Open with tracer on every connection of the pool: tests count the statements a
// path runs and the rows they return (pgx calls a tracer that is also a pgx.BatchTracer for
// each statement of a batch).
func OpenTraced(ctx context.Context, url, role string, log *slog.Logger, tracer pgx.QueryTracer) (*DB, error) {
	return open(ctx, url, role, log, false, WithTracer(tracer))
}

func open(ctx context.Context, url, role string, log *slog.Logger, asyncCommit bool, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if asyncCommit {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, 8)
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
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	d := &DB{Pool: pool, Q: dbsqlc.New(pool), log: log, role: quoteLiteral(cmp.Or(role, "none")), users: pool}
	if !asyncCommit && cfg.MaxConns >= minSplit {
		if d.users, err = pgxpool.NewWithConfig(ctx, cfg.Copy()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open pool: %w", err)
		}
	}
	return d, nil
}

// minSplit is the smallest pool_max_conns for which Open gives the transactions acting for a
// user a pool of their own; a smaller pool (a test's) is shared, so that a process holds no
// more connections than its URL says.
const minSplit = 4

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Stats are the statistics of the handle's pools.
func (d *DB) Stats() []*pgxpool.Stat {
	if d.users == d.Pool {
		return []*pgxpool.Stat{d.Pool.Stat()}
	}
	return []*pgxpool.Stat{d.Pool.Stat(), d.users.Stat()}
}

// Close closes the pools.
func (d *DB) Close() {
	d.Pool.Close()
	if d.users != d.Pool {
		d.users.Close()
	}
}

// AutovacuumOn reports whether the server runs autovacuum. Without it no table is ever
// analyzed: a plan a connection cached while a table was small stays after the table has grown,
// and dead rows and GIN pending lists are cleaned by the statements that meet them.
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
	user     UserScope
	d        *DB
	root     *Tx
	after    []afterItem
	batches  map[any]*commitBatch
	flushes  []*commitBatch
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
	if r.batches[key] == nil {
		if r.batches == nil {
			r.batches = map[any]*commitBatch{}
		}
		b := &commitBatch{key: key, flush: flush}
		r.batches[key] = b
		r.flushes = append(r.flushes, b)
	}
	r.after = append(r.after, afterItem{key: key, item: item})
}

type txKey struct{}

// Detach returns ctx without its transaction: work that runs after a commit (AfterCommit) and
// needs a transaction of its own begins one instead of a savepoint of the transaction that is
// over.
func Detach(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, (*Tx)(nil))
}

// TxFrom returns the transaction ctx runs in, if any.
func TxFrom(ctx context.Context) (*Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*Tx)
	return tx, ok && tx != nil
}

// UserScope is the user a transaction acts for (row-level privacy inside the tenant): their
// private conversations, those shared with the tenant, and the content of the runs they may
// see; an OWNER or ADMIN also sees every run's record (status, cost). The role is the user's
// membership as the database holds it, not what a credential says. The zero UserScope is no
// user: the transaction sees the whole tenant.
type UserScope struct {
	UserID uuid.UUID
	reason string // TenantWide's
}

type userKey struct{}

// WithUser returns ctx whose transactions act for userID (auth.WithActor calls it, so every
// API request and socket is scoped to its user).
func WithUser(ctx context.Context, userID uuid.UUID) context.Context {
	return context.WithValue(ctx, userKey{}, UserScope{UserID: userID})
}

// TenantWide returns ctx whose transactions see every user's rows of their tenant, although ctx
// carries a user: for the request paths that must (reason says which; it is logged at debug
// level by the transactions begun with it). Code without a user (River workers, periodic
// jobs, the CLI) is tenant-wide already.
func TenantWide(ctx context.Context, reason string) context.Context {
	if reason == "" {
		panic("db: TenantWide without a reason")
	}
	return context.WithValue(ctx, userKey{}, UserScope{reason: reason})
}

// UserFrom returns the user ctx's transactions act for (the zero UserScope: none).
func UserFrom(ctx context.Context) UserScope {
	u, _ := ctx.Value(userKey{}).(UserScope)
	if u.UserID == uuid.Nil {
		return UserScope{}
	}
	u.reason = ""
	return u
}

// InTx runs fn in a transaction scoped to tenantID: row-level security admits only that tenant's
// rows, and of those only what the user in ctx (WithUser) may see. An error from fn (or a
// panic) rolls back. Called inside another transaction of the same tenant (found in ctx) it
// nests as a savepoint, switching to ctx's user scope for its duration when that differs.
func (d *DB) InTx(ctx context.Context, tenantID uuid.UUID, fn func(ctx context.Context, tx *Tx) error) error {
	if tenantID == uuid.Nil {
		return errors.New("db: transaction without a tenant")
	}
	return d.run(ctx, tenantID, false, fn)
}

// InTxRetry is InTx for a transaction that takes row locks in an order another one can
// reverse: a control of a run (cancel, stop, pause, resume, an interrupting sendMessage) locks
// the conversation, then the run, while a worker's tool step holds its run from its first event
// on and locks the conversation to store the tools' results. When Postgres ends the
// transaction as a deadlock's victim, it runs again once the other has gone on (at most three
// runs in all). fn must have no effect outside its transaction. Inside another transaction it
// is InTx: the outer transaction is the victim.
func (d *DB) InTxRetry(ctx context.Context, tenantID uuid.UUID, fn func(ctx context.Context, tx *Tx) error) error {
	err := d.InTx(ctx, tenantID, fn)
	if _, nested := TxFrom(ctx); nested {
		return err
	}
	for runs := 1; runs < 3 && IsDeadlock(err) && ctx.Err() == nil; runs++ {
		d.log.InfoContext(ctx, "transaction run again after a deadlock", slog.Int("run", runs+1))
		err = d.InTx(ctx, tenantID, fn)
	}
	return err
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

// beginQuery begins a transaction and scopes it, in one round trip: a statement without
// parameters goes by the simple protocol, which carries both. The scope is transaction-local
// (set_config's is_local), so it ends with the transaction. A UUID's text is hex digits and
// dashes only.
func (d *DB) beginQuery(tenantID uuid.UUID, system bool, user UserScope) string {
	if system {
		return "BEGIN; SELECT set_config('app.system', 'on', true)"
	}
	if user.UserID == uuid.Nil {
		return "BEGIN; SELECT set_config('app.tenant_id', '" + tenantID.String() + "', true)"
	}
	return "BEGIN; SELECT set_config('app.tenant_id', '" + tenantID.String() + "', true), " + d.userConfig(user)
}

// userConfig is the select list that sets a transaction's user scope: the user and UserRole,
// or no user and the pool's role.
func (d *DB) userConfig(u UserScope) string {
	if u.UserID == uuid.Nil {
		return "set_config('app.user_id', '', true), set_config('role', " + d.role + ", true)"
	}
	return "set_config('app.user_id', '" + u.UserID.String() + "', true), set_config('role', '" + UserRole + "', true)"
}

func (d *DB) run(ctx context.Context, tenantID uuid.UUID, system bool, fn func(ctx context.Context, tx *Tx) error) error {
	var user UserScope
	if !system {
		user = UserFrom(ctx)
		if u, ok := ctx.Value(userKey{}).(UserScope); ok && u.reason != "" {
			d.log.DebugContext(ctx, "tenant-wide transaction", slog.String("reason", u.reason))
		}
	}
	if parent, ok := TxFrom(ctx); ok {
		if !parent.system && (system || parent.TenantID != tenantID) {
			return fmt.Errorf("db: nested transaction for tenant %s inside tenant %s", tenantID, parent.TenantID)
		}
		sp, err := parent.Begin(ctx)
		if err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		root := parent.rootTx()
		child := &Tx{Tx: sp, Q: parent.Q.WithTx(sp), TenantID: tenantID, system: parent.system, user: parent.user, d: d, root: root}
		if !parent.system && user != parent.user {
			// The savepoint acts for ctx's user; the parent's scope comes back after it.
			if _, err := sp.Exec(ctx, "SELECT "+d.userConfig(user)); err != nil {
				_ = sp.Rollback(context.WithoutCancel(ctx))
				return fmt.Errorf("user scope: %w", err)
			}
			child.user = user
			defer func() {
				if _, err := parent.Exec(context.WithoutCancel(ctx), "SELECT "+d.userConfig(parent.user)); err != nil {
					d.log.WarnContext(ctx, "restoring a transaction's user scope", slog.Any("error", err))
				}
			}()
		}
		mark := len(root.after)
		if err := finish(ctx, child, fn); err != nil {
			// What a rolled-back savepoint registered never happened.
			root.after = root.after[:mark]
			return err
		}
		return nil
	}
	pool := d.Pool
	if user.UserID != uuid.Nil {
		pool = d.users
	}
	ptx, err := pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: d.beginQuery(tenantID, system, user)})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return finish(ctx, &Tx{Tx: ptx, Q: d.Q.WithTx(ptx), TenantID: tenantID, system: system, user: user, d: d}, fn)
}

// QueueTenantWide queues in b, around the statements queue adds, the switch of the
// transaction's scope from its user to the whole tenant and back. It is for writes whose target
// the transaction has read under its user's scope already, with values the server chose:
// sendMessage locks the conversation as its user, then writes the positions, the run and the
// message in it, which the user policies would check again row by row (about half of those
// writes' time). reason says which path; it is logged at debug level.
func (t *Tx) QueueTenantWide(ctx context.Context, b *pgx.Batch, reason string, queue func(b *pgx.Batch)) {
	if t.user.UserID == uuid.Nil {
		queue(b)
		return
	}
	t.d.log.DebugContext(ctx, "tenant-wide statements", slog.String("reason", reason))
	b.Queue("SELECT " + t.d.userConfig(UserScope{}))
	queue(b)
	b.Queue("SELECT " + t.d.userConfig(t.user))
}

// QueueTenantWideToEnd queues in b the switch of the transaction's scope from its user to the
// whole tenant for the rest of the transaction: what b queues after it and every statement
// after b. It is for a transaction's last work, done for the server once its reads and writes as
// the user are done: sendMessage acquires the run it made for the worker of its own process,
// whose reads (QueueTenantWide's rationale) are the worker's. reason is logged at debug level.
func (t *Tx) QueueTenantWideToEnd(ctx context.Context, b *pgx.Batch, reason string) {
	if t.user.UserID == uuid.Nil {
		return
	}
	t.d.log.DebugContext(ctx, "tenant-wide to the end", slog.String("reason", reason))
	b.Queue("SELECT " + t.d.userConfig(UserScope{}))
	t.user = UserScope{}
}

// finish runs fn in tx, then commits tx (releasing a savepoint, or committing the outermost
// transaction and running what it registered to run after its commit) or rolls it back.
func finish(ctx context.Context, tx *Tx, fn func(ctx context.Context, tx *Tx) error) error {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, tx), tx); err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
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
func (t *Tx) runAfter() {
	for _, a := range t.after {
		if a.fn != nil {
			a.fn()
		} else {
			b := t.batches[a.key]
			b.items = append(b.items, a.item)
		}
	}
	for _, b := range t.flushes {
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

// IsDeadlock reports whether err is Postgres ending a transaction as a deadlock's victim.
func IsDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// IsCheckViolation reports whether err is a CHECK-constraint violation and names the constraint.
func IsCheckViolation(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		return pgErr.ConstraintName, true
	}
	return "", false
}
