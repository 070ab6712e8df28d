package db_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
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

// Not parallel: it sets the package's batch hook.
func TestCommitWith(t *testing.T) {
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	tenant := newTenant(t, d, "commit-with")
	var batches []int
	db.OnPipelineBatch(func(n int) { batches = append(batches, n) })
	t.Cleanup(func() { db.OnPipelineBatch(nil) })
	project := func(name string) func(context.Context, *db.Tx) error { return insertProject(tenant, name) }
	names := func() []string { return projectNames(t, d, tenant) }

	t.Run("the last statements and COMMIT go in one batch", func(t *testing.T) {
		batches = nil
		var after []string
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if err := project("a")(ctx, tx); err != nil {
				return err
			}
			tx.AfterCommit(func() { after = append(after, "before") })
			err := tx.CommitWith(ctx, project("b"), func(ctx context.Context, tx *db.Tx) error {
				tx.AfterCommit(func() { after = append(after, "in") })
				return project("c")(ctx, tx)
			}, func(context.Context, *db.Tx) error { return nil })
			if err != nil {
				return err
			}
			// The transaction is over: nothing more runs in it.
			_, err = tx.Exec(ctx, "SELECT 1")
			require.ErrorIs(t, err, pgx.ErrTxClosed)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, []int{2}, batches, "b and c, with the COMMIT")
		require.Equal(t, []string{"a", "b", "c"}, names())
		require.Equal(t, []string{"before", "in"}, after)
		require.Zero(t, d.Pool.Stat().AcquiredConns(), "the connection went back")
	})

	t.Run("as the first statements: BEGIN, the scope, the statements and COMMIT at once", func(t *testing.T) {
		require.NoError(t, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.CommitWith(ctx, project("d"))
		}))
		require.Contains(t, names(), "d")
		// The scope held: another tenant's transaction cannot write this tenant's rows.
		other := newTenant(t, d, "commit-with-other")
		err := d.InTx(ctx, other, func(ctx context.Context, tx *db.Tx) error { return tx.CommitWith(ctx, project("x")) })
		require.ErrorContains(t, err, "row-level security")
		require.NotContains(t, names(), "x")
	})

	t.Run("a failed statement skips the commit and rolls back", func(t *testing.T) {
		var ran bool
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if err := project("e")(ctx, tx); err != nil {
				return err
			}
			tx.AfterCommit(func() { ran = true })
			return tx.CommitWith(ctx, project("f"), func(ctx context.Context, tx *db.Tx) error {
				_, err := tx.Exec(ctx, "SELECT 1 / 0")
				return err
			}, project("g"))
		})
		require.ErrorContains(t, err, "division by zero")
		require.False(t, ran)
		got := names()
		require.NotContains(t, got, "e")
		require.NotContains(t, got, "f")
		require.NotContains(t, got, "g")
		require.Zero(t, d.Pool.Stat().AcquiredConns())
		// The pool's connection is usable (not left in a transaction).
		require.NoError(t, d.InTx(ctx, tenant, project("h")))
	})

	t.Run("a failed commit is the transaction's error", func(t *testing.T) {
		// A deferred constraint is checked at COMMIT: the statements succeed, the commit fails.
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE cw_d (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)"); err != nil {
				return err
			}
			return tx.CommitWith(ctx, func(ctx context.Context, tx *db.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO cw_d VALUES (1), (1)")
				return err
			})
		})
		require.True(t, db.IsUniqueViolation(err, ""), "%v", err)
		require.Zero(t, d.Pool.Stat().AcquiredConns())
	})

	t.Run("one statement per function", func(t *testing.T) {
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.CommitWith(ctx, func(ctx context.Context, tx *db.Tx) error {
				if err := project("i")(ctx, tx); err != nil {
					return err
				}
				return project("j")(ctx, tx)
			})
		})
		require.ErrorContains(t, err, "statement after CommitWith's commit")
		// What went with the COMMIT stays committed (the function's error cannot undo it).
		require.Contains(t, names(), "i")
		require.NotContains(t, names(), "j")
	})

	t.Run("AtCommit statements go with the COMMIT", func(t *testing.T) {
		batches = nil
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			tx.AtCommit(project("r"))
			if err := tx.Pipeline(ctx, func(ctx context.Context, tx *db.Tx) error {
				tx.AtCommit(project("s"))
				return project("t")(ctx, tx)
			}, project("u")); err != nil {
				return err
			}
			// Registered in a savepoint that rolls back: never runs.
			_ = d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				tx.AtCommit(project("v"))
				return errors.New("undo")
			})
			// Not yet run: the function has not returned.
			require.NotContains(t, names(), "r")
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, []int{2, 2}, batches, "t and u; then r and s with the COMMIT")
		got := names()
		for _, n := range []string{"r", "s", "t", "u"} {
			require.Contains(t, got, n)
		}
		require.NotContains(t, got, "v")
		// A failing function's error rolls everything back; an error of the transaction's
		// function runs none of them.
		err = d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			tx.AtCommit(project("w"))
			tx.AtCommit(func(ctx context.Context, tx *db.Tx) error {
				_, err := tx.Exec(ctx, "SELECT 1 / 0")
				return err
			})
			return project("y")(ctx, tx)
		})
		require.ErrorContains(t, err, "division by zero")
		err = d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			tx.AtCommit(project("z"))
			return errors.New("no")
		})
		require.EqualError(t, err, "no")
		got = names()
		for _, n := range []string{"w", "y", "z"} {
			require.NotContains(t, got, n)
		}
		require.Zero(t, d.Pool.Stat().AcquiredConns())
	})

	t.Run("inside a savepoint or a pipeline it does not commit", func(t *testing.T) {
		batches = nil
		err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				return tx.CommitWith(ctx, project("k"), project("l"))
			}); err != nil {
				return err
			}
			if err := tx.Pipeline(ctx, func(ctx context.Context, tx *db.Tx) error {
				return tx.CommitWith(ctx, project("m"), project("n"))
			}, project("o")); err != nil {
				return err
			}
			// Still open: a statement after them runs, then the transaction rolls back.
			if err := project("p")(ctx, tx); err != nil {
				return err
			}
			return errors.New("roll back")
		})
		require.EqualError(t, err, "roll back")
		got := names()
		for _, n := range []string{"k", "l", "m", "n", "o", "p"} {
			require.NotContains(t, got, n)
		}
		// No functions, or functions that run nothing: the transaction commits as usual.
		require.NoError(t, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if err := project("q")(ctx, tx); err != nil {
				return err
			}
			if err := tx.CommitWith(ctx); err != nil {
				return err
			}
			return tx.CommitWith(ctx, func(context.Context, *db.Tx) error { return nil })
		}))
		require.Contains(t, names(), "q")
	})
}

func TestCommitGuard(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	tenant := newTenant(t, d, "guard")
	refuse := errors.New("refused")
	insert := func(name string) func(context.Context, *db.Tx) error { return insertProject(tenant, name) }
	count := func(name string) int {
		var n int
		require.NoError(t, d.InTx(context.Background(), tenant, func(ctx context.Context, tx *db.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM projects WHERE name = $1", name).Scan(&n)
		}))
		return n
	}
	var asked atomic.Int32
	guard := func(err error) context.Context {
		return db.WithCommitGuard(context.Background(), func() error { asked.Add(1); return err })
	}
	// A refusal rolls back: by the plain commit, by CommitWith and with AtCommit statements.
	for i, fn := range []func(ctx context.Context, tx *db.Tx) error{
		insert("a"),
		func(ctx context.Context, tx *db.Tx) error { return tx.CommitWith(ctx, insert("a")) },
		func(ctx context.Context, tx *db.Tx) error { tx.AtCommit(insert("a")); return insert("a")(ctx, tx) },
	} {
		require.ErrorIs(t, d.InTx(guard(refuse), tenant, fn), refuse, "case %d", i)
	}
	require.Zero(t, count("a"))
	require.Zero(t, d.Pool.Stat().AcquiredConns())
	// Admitted: committed; a savepoint does not ask, the outermost transaction does.
	asked.Store(0)
	require.NoError(t, d.InTx(guard(nil), tenant, func(ctx context.Context, tx *db.Tx) error {
		if err := d.InTx(ctx, tenant, insert("b")); err != nil {
			return err
		}
		return insert("b")(ctx, tx)
	}))
	require.Equal(t, 2, count("b"))
	require.Equal(t, int32(1), asked.Load())
}

// readTenant is a Pipeline function reading the tenant's row.
func readTenant(tenant uuid.UUID) func(context.Context, *db.Tx) error {
	return func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantGetByID(ctx, tenant)
		return err
	}
}

// insertProject is a Pipeline function inserting a project named name.
// projectNames lists the tenant's projects' names, in order.
func projectNames(t *testing.T, d *db.DB, tenant uuid.UUID) []string {
	t.Helper()
	var out []string
	require.NoError(t, d.InTx(context.Background(), tenant, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Query(ctx, "SELECT name FROM projects ORDER BY name")
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}))
	return out
}

func insertProject(tenant uuid.UUID, name string) func(context.Context, *db.Tx) error {
	return func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.ProjectInsert(ctx, dbsqlc.ProjectInsertParams{TenantID: tenant, ID: uuid.Must(uuid.NewV7()), Name: name})
		return err
	}
}

func TestInTxEarly(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	tenant := newTenant(t, d, "in-tx-early")
	project := func(name string) func(context.Context, *db.Tx) error { return insertProject(tenant, name) }
	names := func() []string { return projectNames(t, d, tenant) }

	t.Run("the last statements' results come back before the commit ends", func(t *testing.T) {
		// The COMMIT waits for an advisory lock this test holds (a deferred trigger takes it):
		// the transaction's statements must be answered all the same.
		hold, err := d.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer hold.Release()
		_, err = hold.Exec(ctx, "SELECT pg_advisory_lock(7301)")
		require.NoError(t, err)
		var after, reserved atomic.Bool
		type early struct {
			confirm func(context.Context) error
			err     error
		}
		got := make(chan early, 1)
		go func() {
			confirm, err := d.InTxEarly(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				for _, q := range []string{
					"CREATE TEMP TABLE early_gate (id int) ON COMMIT DROP",
					"CREATE FUNCTION pg_temp.early_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock(7301); RETURN NULL; END $$",
					"CREATE CONSTRAINT TRIGGER early_gate AFTER INSERT ON early_gate DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.early_gate()",
					"INSERT INTO early_gate VALUES (1)",
				} {
					if _, err := tx.Exec(ctx, q); err != nil {
						return err
					}
				}
				tx.AfterCommit(func() { after.Store(true) })
				tx.AtCommit(func(ctx context.Context, tx *db.Tx) error {
					if err := project("early-a")(ctx, tx); err != nil {
						return err
					}
					reserved.Store(true)
					return nil
				})
				return nil
			})
			got <- early{confirm, err}
		}()
		var e early
		select {
		case e = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("InTxEarly waited for the commit")
		}
		require.NoError(t, e.err)
		require.True(t, reserved.Load(), "the AtCommit statement's result came back")
		short, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, e.confirm(short), context.Canceled, "the commit is still waiting")
		require.False(t, after.Load())
		require.NotContains(t, names(), "early-a", "not visible before the commit")
		_, err = hold.Exec(ctx, "SELECT pg_advisory_unlock(7301)")
		require.NoError(t, err)
		require.NoError(t, e.confirm(ctx))
		require.NoError(t, e.confirm(ctx), "confirm may be asked again")
		require.True(t, after.Load(), "AfterCommit ran before confirm returned")
		require.Contains(t, names(), "early-a")
	})

	t.Run("a failed statement rolls back and is InTxEarly's error", func(t *testing.T) {
		var after bool
		confirm, err := d.InTxEarly(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if err := project("early-b")(ctx, tx); err != nil {
				return err
			}
			tx.AfterCommit(func() { after = true })
			tx.AtCommit(project("early-c"))
			tx.AtCommit(func(ctx context.Context, tx *db.Tx) error {
				_, err := tx.Exec(ctx, "SELECT 1 / 0")
				return err
			})
			tx.AtCommit(project("early-d"))
			return nil
		})
		require.ErrorContains(t, err, "division by zero")
		require.Nil(t, confirm)
		require.False(t, after)
		for _, n := range []string{"early-b", "early-c", "early-d"} {
			require.NotContains(t, names(), n)
		}
		require.Zero(t, d.Pool.Stat().AcquiredConns())
		// The connection went back to the pool out of the transaction: it is usable.
		require.NoError(t, d.InTx(ctx, tenant, project("early-e")))
		require.Contains(t, names(), "early-e")
	})

	t.Run("a failed commit is confirm's error", func(t *testing.T) {
		confirm, err := d.InTxEarly(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE early_d (id int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO early_d VALUES (1), (1)"); err != nil {
				return err
			}
			tx.AtCommit(project("early-f"))
			return nil
		})
		require.NoError(t, err, "the statements succeeded")
		err = confirm(ctx)
		require.True(t, db.IsUniqueViolation(err, ""), "%v", err)
		require.NotContains(t, names(), "early-f")
		require.Zero(t, d.Pool.Stat().AcquiredConns())
	})

	t.Run("the first confirm reads the outcome and runs AfterCommit in its own goroutine", func(t *testing.T) {
		var ranIn atomic.Uint64
		confirm, err := d.InTxEarly(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
			tx.AfterCommit(func() { ranIn.Store(goroutineID()) })
			tx.AtCommit(project("early-h"))
			return nil
		})
		require.NoError(t, err)
		// Nobody read the commit's outcome yet: the connection is still the transaction's.
		require.Equal(t, int32(1), d.Pool.Stat().AcquiredConns())
		require.Zero(t, ranIn.Load())
		require.NoError(t, confirm(context.WithoutCancel(ctx)))
		require.Equal(t, goroutineID(), ranIn.Load(), "AfterCommit ran in the goroutine of the first confirm")
		require.NoError(t, confirm(ctx), "later calls report the same outcome")
		require.Contains(t, names(), "early-h")
		require.Zero(t, d.Pool.Stat().AcquiredConns())
	})

	t.Run("without statements for the COMMIT it commits in the background", func(t *testing.T) {
		confirm, err := d.InTxEarly(ctx, tenant, project("early-g"))
		require.NoError(t, err)
		require.NoError(t, confirm(ctx))
		require.Contains(t, names(), "early-g")
		require.Zero(t, d.Pool.Stat().AcquiredConns())
	})
}

// goroutineID is the calling goroutine's number, from its stack header.
func goroutineID() uint64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}
