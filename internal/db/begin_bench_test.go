package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// BenchmarkTenantTx: a tenant's transaction of one read, its scope set with its BEGIN (db.InTx:
// one round trip) against set by a statement of its own after BEGIN (two).
func BenchmarkTenantTx(b *testing.B) {
	d, _ := dbtest.Open(b)
	ctx := context.Background()
	tenant := newTenant(b, d, "bench")
	b.Run("scope with BEGIN", func(b *testing.B) {
		for b.Loop() {
			if err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				_, err := tx.Q.TenantGetByID(ctx, tenant)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scope after BEGIN", func(b *testing.B) {
		for b.Loop() {
			if err := pgx.BeginFunc(ctx, d.Pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", tenant.String()); err != nil {
					return err
				}
				_, err := d.Q.WithTx(tx).TenantGetByID(ctx, tenant)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
