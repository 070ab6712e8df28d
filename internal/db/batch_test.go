package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
)

func TestAfterCommitBatch(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	tenant := uuid.Must(uuid.NewV7())
	var flushed [][]any
	var order []string
	flush := func(items []any) { flushed = append(flushed, items); order = append(order, "flush") }
	type key struct{}
	err := d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
		tx.AfterCommitBatch(key{}, 1, flush)
		tx.AfterCommit(func() { order = append(order, "after") })
		// A savepoint that rolls back takes its items with it; one that commits keeps them.
		_ = d.InTx(ctx, tenant, func(ctx context.Context, sp *db.Tx) error {
			sp.AfterCommitBatch(key{}, 2, flush)
			return errors.New("roll back")
		})
		require.NoError(t, d.InTx(ctx, tenant, func(ctx context.Context, sp *db.Tx) error {
			sp.AfterCommitBatch(key{}, 3, flush)
			return nil
		}))
		tx.AfterCommitBatch(key{}, 4, func([]any) { t.Error("only the first flush of a key is used") })
		require.Empty(t, flushed, "nothing runs before the commit")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, [][]any{{1, 3, 4}}, flushed)
	require.Equal(t, []string{"after", "flush"}, order, "batches flush after every AfterCommit function")

	// A transaction that rolls back flushes nothing.
	flushed = nil
	_ = d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
		tx.AfterCommitBatch(key{}, 1, flush)
		return errors.New("roll back")
	})
	require.Empty(t, flushed)
}
