package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
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

func TestQueryWithoutTenantSeesNothing(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, d.InTx(ctx, id, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: id, Name: "acme"})
		return err
	}))
	// Straight on the pool, no transaction scope: RLS hides every tenant row.
	_, err := d.Q.TenantGetByID(ctx, id)
	require.True(t, db.IsNoRows(err), "unscoped query saw a tenant row: %v", err)
	// A system transaction sees it.
	require.NoError(t, d.InSystemTx(ctx, "test", func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.TenantGetByID(ctx, id)
		return err
	}))
}
