package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// Not parallel: it sets the package's batch hook.
func TestPipeline(t *testing.T) {
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	tenant := newTenant(t, d, "pipeline")
	var batches []int
	db.OnPipelineBatch(func(n int) { batches = append(batches, n) })
	t.Cleanup(func() { db.OnPipelineBatch(nil) })

	t.Run("statements of the running functions go together", func(t *testing.T) {
		batches = nil
		var name string
		var series []int
		var missing error
		var flushed []any
		type key struct{}
		flush := func(items []any) { flushed = items }
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE pipe_t (id serial, n int) ON COMMIT DROP"); err != nil {
				return err
			}
			err := tx.Pipeline(ctx,
				func(ctx context.Context, tx *db.Tx) error {
					tn, err := tx.Q.TenantGetByID(ctx, tenant) // QueryRow
					if err != nil {
						return err
					}
					name = tn.Name
					if _, err := tx.Exec(ctx, "INSERT INTO pipe_t (n) VALUES (1), (2)"); err != nil {
						return err
					}
					rows, err := tx.Query(ctx, "SELECT n FROM pipe_t ORDER BY id")
					if err != nil {
						return err
					}
					series, err = pgx.CollectRows(rows, pgx.RowTo[int])
					tx.AfterCommitBatch(key{}, "first", flush)
					return err
				},
				func(ctx context.Context, tx *db.Tx) error {
					_, missing = tx.Q.TenantGetByID(ctx, uuid.Must(uuid.NewV7()))
					tx.AfterCommitBatch(key{}, "second", flush)
					return nil
				},
				func(ctx context.Context, tx *db.Tx) error {
					tx.AfterCommitBatch(key{}, "third", flush) // registered before the others run
					var n int
					if err := tx.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil {
						return err
					}
					if n != 42 {
						return errors.New("41 + 1 is not 42")
					}
					_, err := tx.Exec(ctx, "INSERT INTO pipe_t (n) VALUES (3)")
					return err
				},
			)
			if err != nil {
				return err
			}
			// The transaction goes on after the pipeline, and sees what it wrote.
			var total int
			require.NoError(t, tx.QueryRow(ctx, "SELECT sum(n) FROM pipe_t").Scan(&total))
			require.Equal(t, 6, total)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, "pipeline", name)
		require.True(t, db.IsNoRows(missing), "a row not found is the function's own answer: %v", missing)
		// Batch 1: every function's first statement; 2: the first's INSERT and the third's; 3:
		// the first's SELECT, alone, because the others have returned. The rows the first
		// function reads show the order within a batch: its INSERT went before the third's.
		require.Equal(t, []int{3, 2, 1}, batches)
		require.Equal(t, []int{1, 2, 3}, series)
		require.Equal(t, []any{"first", "second", "third"}, flushed, "after-commit items follow the order of the functions")
	})

	t.Run("a failed statement fails the pipeline and the transaction", func(t *testing.T) {
		var flushed bool
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.Pipeline(ctx,
				func(ctx context.Context, tx *db.Tx) error {
					tx.AfterCommit(func() { flushed = true })
					if _, err := tx.Q.TenantGetByID(ctx, tenant); err != nil {
						return err
					}
					// After the failure: aborted. The function returns that, but the
					// pipeline answers with the cause.
					_, err := tx.Q.TenantGetByID(ctx, tenant)
					require.ErrorContains(t, err, "current transaction is aborted")
					return err
				},
				func(ctx context.Context, tx *db.Tx) error {
					_, err := tx.Exec(ctx, "SELECT 1 / 0")
					return err
				},
			)
		})
		require.ErrorContains(t, err, "division by zero")
		require.NotContains(t, err.Error(), "aborted")
		require.False(t, flushed)
	})

	t.Run("savepoints, commits and panics are refused", func(t *testing.T) {
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.Pipeline(ctx,
				func(ctx context.Context, tx *db.Tx) error {
					return d.InTx(ctx, tenant, func(context.Context, *db.Tx) error { return nil })
				},
				func(ctx context.Context, tx *db.Tx) error { return tx.Commit(ctx) },
			)
		})
		require.Error(t, err)
	})

	t.Run("a pipeline inside a function joins the batches in its place", func(t *testing.T) {
		batches = nil
		var got []int
		var mu sync.Mutex
		read := func(n int) func(context.Context, *db.Tx) error {
			return func(ctx context.Context, tx *db.Tx) error {
				var v int
				err := tx.QueryRow(ctx, "SELECT $1::int", n).Scan(&v)
				mu.Lock()
				got = append(got, v)
				mu.Unlock()
				return err
			}
		}
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE pipe_n (id serial, n int) ON COMMIT DROP"); err != nil {
				return err
			}
			insert := func(n int) func(context.Context, *db.Tx) error {
				return func(ctx context.Context, tx *db.Tx) error {
					_, err := tx.Exec(ctx, "INSERT INTO pipe_n (n) VALUES ($1)", n)
					return err
				}
			}
			err := tx.Pipeline(ctx,
				insert(1),
				func(ctx context.Context, tx *db.Tx) error {
					if err := read(2)(ctx, tx); err != nil {
						return err
					}
					// Nested, after a statement of its own: its functions take its place.
					return tx.Pipeline(ctx, insert(2), read(3), insert(3))
				},
				func(ctx context.Context, tx *db.Tx) error {
					if err := read(4)(ctx, tx); err != nil {
						return err
					}
					if err := read(5)(ctx, tx); err != nil {
						return err
					}
					return insert(4)(ctx, tx)
				},
			)
			if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "SELECT n FROM pipe_n ORDER BY id")
			if err != nil {
				return err
			}
			order, err := pgx.CollectRows(rows, pgx.RowTo[int])
			require.Equal(t, []int{1, 2, 3, 4}, order, "statements of a batch go in the order of the functions, nested ones in their parent's place")
			return err
		})
		require.NoError(t, err)
		require.ElementsMatch(t, []int{2, 3, 4, 5}, got)
		// 1: insert 1, read 2, read 4; 2: the nested three and read 5; 3: insert 4.
		require.Equal(t, []int{3, 4, 1}, batches)
		// A panic waits for the other functions, then goes on in the caller (InTx rolls back
		// and panics on).
		require.PanicsWithValue(t, "boom", func() {
			defer func() {
				r := recover()
				require.Contains(t, r, "boom")
				require.Contains(t, r, "in db.Tx.Pipeline function 1")
				panic("boom")
			}()
			_ = d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				return tx.Pipeline(ctx,
					func(ctx context.Context, tx *db.Tx) error {
						_, err := tx.Q.TenantGetByID(ctx, tenant)
						return err
					},
					func(ctx context.Context, tx *db.Tx) error { panic("boom") },
				)
			})
		})
		require.Zero(t, d.Pool.Stat().AcquiredConns(), "the connection went back")
		// No functions: nothing to do, also nested.
		require.NoError(t, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.Pipeline(ctx,
				func(ctx context.Context, tx *db.Tx) error { return tx.Pipeline(ctx) },
				func(ctx context.Context, tx *db.Tx) error { return tx.Pipeline(ctx) },
			)
		}))
	})

	t.Run("a cancelled context ends every function", func(t *testing.T) {
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			return tx.Pipeline(cctx,
				func(ctx context.Context, tx *db.Tx) error {
					_, err := tx.Q.TenantGetByID(ctx, tenant)
					return err
				},
				func(ctx context.Context, tx *db.Tx) error {
					_, err := tx.Q.TenantGetByID(ctx, tenant)
					return err
				},
			)
		})
		require.True(t, errors.Is(err, context.Canceled), "%v", err)
	})
}
