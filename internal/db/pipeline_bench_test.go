package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// BenchmarkReads is a transaction of four independent reads, one after the other and as one
// Pipeline: what pipelining saves per transaction on this machine.
func BenchmarkReads(b *testing.B) {
	d, _ := dbtest.Open(b)
	ctx := context.Background()
	tenant := newTenant(b, d, "bench")
	read := readTenant(tenant)
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				for range 4 {
					if err := read(ctx, tx); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	})
	b.Run("pipeline", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				return tx.Pipeline(ctx, read, read, read, read)
			}))
		}
	})
}

// BenchmarkWriteCommit is a transaction of a read and two writes, committed after the writes
// (Pipeline, then COMMIT) and with them (CommitWith): what sending COMMIT with a transaction's
// last statements saves. Each write is a WAL-flushed commit, as a turn's are.
func BenchmarkWriteCommit(b *testing.B) {
	d, _ := dbtest.Open(b)
	ctx := context.Background()
	tenant := newTenant(b, d, "bench")
	read := readTenant(tenant)
	write := insertProject(tenant, "p")
	b.Run("then-commit", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				if err := read(ctx, tx); err != nil {
					return err
				}
				return tx.Pipeline(ctx, write, write)
			}))
		}
	})
	b.Run("commit-with", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, d.InTx(ctx, tenant, func(ctx context.Context, tx *db.Tx) error {
				if err := read(ctx, tx); err != nil {
					return err
				}
				return tx.CommitWith(ctx, write, write)
			}))
		}
	})
}
