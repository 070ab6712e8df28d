package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
)

func TestInTxScopesToTenant(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, id := range []uuid.UUID{a, b} {
		require.NoError(t, d.InTx(ctx, id, func(ctx context.Context, tx *db.Tx) error {
			_, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: id, Name: "t-" + id.String()[:8]})
			return err
		}))
	}
	// Inside tenant a, tenant b's row does not exist.
	require.NoError(t, d.InTx(ctx, a, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantGetByID(ctx, b)
		require.True(t, db.IsNoRows(err), "tenant b visible from a: %v", err)
		got, err := tx.Q.TenantGetByID(ctx, a)
		require.NoError(t, err)
		require.Equal(t, a, got.ID)
		return nil
	}))
	// Writing another tenant's row is refused by the policy's WITH CHECK.
	err := d.InTx(ctx, a, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: uuid.Must(uuid.NewV7()), Name: "x"})
		return err
	})
	require.ErrorContains(t, err, "row-level security")
	// A nested transaction of another tenant is refused; of the same tenant it is a savepoint
	// whose failure leaves the outer transaction usable.
	require.NoError(t, d.InTx(ctx, a, func(ctx context.Context, tx *db.Tx) error {
		require.Error(t, d.InTx(ctx, b, func(context.Context, *db.Tx) error { return nil }))
		inner := d.InTx(ctx, a, func(ctx context.Context, tx *db.Tx) error {
			_, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: a, Name: "dup"})
			return err
		})
		require.True(t, db.IsUniqueViolation(inner, ""), "inner: %v", inner)
		_, err := tx.Q.TenantGetByID(ctx, a)
		return err
	}))
}

// newTenant inserts a tenant named name and returns its id.
func newTenant(t testing.TB, d *db.DB, name string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, d.InTx(context.Background(), id, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: id, Name: name})
		return err
	}))
	return id
}

func TestQueryWithoutTenantSeesNothing(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	id := newTenant(t, d, "acme")
	// Straight on the pool, no transaction scope: RLS hides every tenant row.
	_, err := d.Q.TenantGetByID(ctx, id)
	require.True(t, db.IsNoRows(err), "unscoped query saw a tenant row: %v", err)
	// A system transaction sees it.
	require.NoError(t, d.InSystemTx(ctx, "test", func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantGetByID(ctx, id)
		return err
	}))
}

// A transaction is scoped to its tenant from its BEGIN: whatever its statements are (a query, an
// exec, a batch, a savepoint), the scope holds for them, and it ends with the transaction.
func TestTransactionScopeHoldsForEveryStatement(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	a := newTenant(t, d, "first")
	scope := func(ctx context.Context, tx *db.Tx) string {
		var s string
		require.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('app.tenant_id', true)").Scan(&s))
		return s
	}
	firsts := map[string]func(ctx context.Context, tx *db.Tx) error{
		"query row": func(ctx context.Context, tx *db.Tx) error {
			_, err := tx.Q.TenantGetByID(ctx, a)
			return err
		},
		"query": func(ctx context.Context, tx *db.Tx) error {
			rows, err := tx.Query(ctx, "SELECT id FROM tenants")
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			require.Equal(t, []uuid.UUID{a}, ids, "row-level security applies to the first statement")
			return err
		},
		"rows read to the end, then another statement": func(ctx context.Context, tx *db.Tx) error {
			rows, err := tx.Query(ctx, "SELECT generate_series(1, 3)")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
			}
			_, err = tx.Exec(ctx, "SELECT 1") // the connection is free once the rows are read
			return err
		},
		"exec": func(ctx context.Context, tx *db.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE tenants SET name = name WHERE id = $1", a)
			return err
		},
		"batch": func(ctx context.Context, tx *db.Tx) error {
			b := &pgx.Batch{}
			b.Queue("SELECT 1")
			b.Queue("SELECT 2")
			br := tx.SendBatch(ctx, b)
			var one, two int
			require.NoError(t, br.QueryRow().Scan(&one))
			require.NoError(t, br.QueryRow().Scan(&two))
			require.Equal(t, []int{1, 2}, []int{one, two})
			return br.Close()
		},
		"savepoint": func(ctx context.Context, tx *db.Tx) error {
			return d.InTx(ctx, a, func(ctx context.Context, sp *db.Tx) error {
				_, err := sp.Q.TenantGetByID(ctx, a)
				return err
			})
		},
		"nothing": func(context.Context, *db.Tx) error { return nil },
	}
	for name, first := range firsts {
		require.NoError(t, d.InTx(ctx, a, func(ctx context.Context, tx *db.Tx) error {
			if err := first(ctx, tx); err != nil {
				return err
			}
			// A transaction-local setting still holds: the same transaction.
			require.Equal(t, a.String(), scope(ctx, tx), name)
			return nil
		}), name)
	}
	// A first statement that fails rolls everything back and gives the connection back.
	err := d.InTx(ctx, a, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1 / 0")
		return err
	})
	require.ErrorContains(t, err, "division by zero")
	require.Zero(t, d.Pool.Stat().AcquiredConns())
	// The setting is the transaction's own: outside one there is none.
	var s string
	require.NoError(t, d.Pool.QueryRow(ctx, "SELECT coalesce(current_setting('app.tenant_id', true), '')").Scan(&s))
	require.Empty(t, s)
}
