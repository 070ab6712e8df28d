package dbsqlc

// Not generated: sqlc's queries queued in a pgx.Batch, so that statements which do not depend on
// each other's results go to Postgres in one round trip (tx.SendBatch). The statement and its
// arguments are sqlc's own: the query function calls a generated method on Queries backed by a
// recorder, which keeps what the method would send and runs nothing. Each result lands in out
// when the batch's results are read (BatchResults.Close), its columns read by position into the
// row type sqlc generated for the query (a struct); a QueueOne that finds no row leaves
// pgx.ErrNoRows as the batch's error.

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// QueueOne queues a :one query, whose row lands in out.
func QueueOne[T any](b *pgx.Batch, query func(*Queries) (T, error), out *T) {
	queue(b, func(q *Queries) { _, _ = query(q) }).Query(one(out))
}

// QueueMaybe queues a :one query that may find no row: found says whether it did (out is left
// as it was when not).
func QueueMaybe[T any](b *pgx.Batch, query func(*Queries) (T, error), out *T, found *bool) {
	queue(b, func(q *Queries) { _, _ = query(q) }).Query(func(rows pgx.Rows) error {
		err := one(out)(rows)
		*found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// QueueMany queues a :many query, whose rows land in out.
func QueueMany[T any](b *pgx.Batch, query func(*Queries) ([]T, error), out *[]T) {
	queue(b, func(q *Queries) { _, _ = query(q) }).Query(func(rows pgx.Rows) error {
		v, err := pgx.AppendRows(make([]T, 0), rows, pgx.RowToStructByPos[T])
		if err == nil {
			*out = v
		}
		return err
	})
}

// QueueExec queues an :exec query.
func QueueExec(b *pgx.Batch, query func(*Queries) error) {
	queue(b, func(q *Queries) { _ = query(q) })
}

func one[T any](out *T) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		v, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[T])
		if err == nil {
			*out = v
		}
		return err
	}
}

// queue queues in b the one statement call sends.
func queue(b *pgx.Batch, call func(*Queries)) *pgx.QueuedQuery {
	var r recorder
	call(New(&r))
	if r.n != 1 {
		panic("dbsqlc: a queued query must call one generated query method")
	}
	return b.Queue(r.sql, r.args...)
}

// recorder is a DBTX that keeps the statement a generated method sends instead of sending it.
type recorder struct {
	n    int
	sql  string
	args []any
}

var errQueued = errors.New("dbsqlc: queued, not run")

func (r *recorder) record(sql string, args []any) {
	r.n++
	r.sql, r.args = sql, args
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.record(sql, args)
	return pgconn.CommandTag{}, errQueued
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.record(sql, args)
	return nil, errQueued
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.record(sql, args)
	return queuedRow{}
}

type queuedRow struct{}

func (queuedRow) Scan(...any) error { return errQueued }
