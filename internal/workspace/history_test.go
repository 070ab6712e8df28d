package workspace_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/workspace"
	"github.com/agentry/agentry/internal/workspace/workspacetest"
)

func (b *bundle) count(t *testing.T, p workspacetest.Project, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, b.in(t, p, func(ctx context.Context, tx *db.Tx) error {
		return tx.QueryRow(ctx, sql).Scan(&n)
	}))
	return n
}

func TestWorkspaceVersionsAndBlobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 1, b.write(t, b.a, "f.txt", "one\n"))
	require.Equal(t, 2, b.write(t, b.a, "f.txt", "two\n"))
	v, _, err := b.edit(t, b.a, "f.txt", "two", "three", false)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		return b.ws.Delete(ctx, tx, b.a.TenantID, b.a.ProjectID, "f.txt")
	}))
	require.Equal(t, 5, b.write(t, b.a, "f.txt", "one\n")) // same content as version 1
	// Another file with the same content shares its blob.
	require.Equal(t, 1, b.write(t, b.a, "g.txt", "one\n"))

	var rows []dbsqlc.WorkspaceVersionListRow
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) (err error) {
		rows, err = tx.Q.WorkspaceVersionList(ctx, dbsqlc.WorkspaceVersionListParams{TenantID: b.a.TenantID, ProjectID: b.a.ProjectID, Path: "f.txt"})
		return err
	}))
	require.Len(t, rows, 5)
	for i, r := range rows {
		require.Equal(t, int32(i+1), r.Version)
		require.False(t, r.RunID.Valid, "no run made these")
	}
	require.Nil(t, rows[3].Sha256, "version 4 is the deletion")
	require.Equal(t, rows[0].Sha256, rows[4].Sha256)
	// one, two, three: three distinct contents, stored once each.
	require.Equal(t, 3, b.count(t, b.a, "SELECT count(*) FROM workspace_blobs"))
	// Row-level security: the other tenant sees none of it.
	require.Zero(t, b.count(t, b.b, "SELECT count(*) FROM workspace_blobs"))
	require.Zero(t, b.count(t, b.b, "SELECT count(*) FROM workspace_file_versions"))
}

// A run's snapshot is a manifest: with 1,000 files in the workspace and a run changing one,
// blob storage grows by exactly that one content.
func TestWorkspaceSnapshotCostsWhatChanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		for i := range 1000 {
			if _, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, fmt.Sprintf("src/f%04d.txt", i), fmt.Sprintf("file %d\n", i)); err != nil {
				return err
			}
		}
		return nil
	}))
	blobs := b.count(t, b.a, "SELECT count(*) FROM workspace_blobs")
	blobBytes := b.count(t, b.a, "SELECT coalesce(sum(size), 0) FROM workspace_blobs")
	require.Equal(t, 1000, blobs)

	runID := uuid.New()
	before := b.tree(t, b.a)
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		rctx := workspace.ForRun(ctx, nil, events.Scope{TenantID: b.a.TenantID, RunID: runID}, uuid.New())
		_, err := b.ws.Write(rctx, tx, b.a.TenantID, b.a.ProjectID, "src/f0007.txt", "changed\n")
		return err
	}))
	require.Equal(t, blobs+1, b.count(t, b.a, "SELECT count(*) FROM workspace_blobs"), "one new blob")
	require.Equal(t, blobBytes+len("changed\n"), b.count(t, b.a, "SELECT coalesce(sum(size), 0) FROM workspace_blobs"))
	require.Equal(t, 1, b.count(t, b.a, "SELECT count(*) FROM workspace_snapshots"))
	require.Equal(t, 1000, b.count(t, b.a, "SELECT count(*) FROM workspace_snapshot_entries"), "a manifest row per file, no content")
	require.Equal(t, 1, b.count(t, b.a, "SELECT count(*) FROM workspace_journal"))

	// The snapshot holds the state before the change: its manifest hashes to the old tree.
	var sn dbsqlc.WorkspaceSnapshot
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) (err error) {
		sn, err = tx.Q.WorkspaceSnapshotByRun(ctx, dbsqlc.WorkspaceSnapshotByRunParams{TenantID: b.a.TenantID, RunID: uuid.NullUUID{UUID: runID, Valid: true}})
		return err
	}))
	require.Equal(t, workspace.SnapshotOpen, sn.State)
	require.NotEqual(t, before, b.tree(t, b.a))
}

// The journal records each operation of a run with its inverse, and only the run's first
// change takes a snapshot.
func TestWorkspaceJournal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, b.a, "keep.txt", "k\n")
	b.write(t, b.a, "gone.txt", "g\n")
	runID := uuid.New()
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		rctx := workspace.ForRun(ctx, nil, events.Scope{TenantID: b.a.TenantID, RunID: runID}, uuid.New())
		if _, err := b.ws.Write(rctx, tx, b.a.TenantID, b.a.ProjectID, "new.txt", "n\n"); err != nil {
			return err
		}
		if _, _, err := b.ws.Edit(rctx, tx, b.a.TenantID, b.a.ProjectID, "keep.txt", "k", "K", false); err != nil {
			return err
		}
		return b.ws.Delete(rctx, tx, b.a.TenantID, b.a.ProjectID, "gone.txt")
	}))
	var j []dbsqlc.WorkspaceJournal
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) (err error) {
		j, err = tx.Q.WorkspaceJournalByRun(ctx, dbsqlc.WorkspaceJournalByRunParams{TenantID: b.a.TenantID, RunID: runID})
		return err
	}))
	require.Len(t, j, 3)
	require.Equal(t, []string{"write", "write", "delete"}, []string{j[0].Op, j[1].Op, j[2].Op})
	require.Nil(t, j[0].BeforeSha, "inverse of creating new.txt: delete it")
	require.NotNil(t, j[1].BeforeSha)
	require.Nil(t, j[2].AfterSha)
	require.NotNil(t, j[2].BeforeSha, "inverse of the delete: recreate gone.txt")
	require.Equal(t, 1, b.count(t, b.a, "SELECT count(*) FROM workspace_snapshots"))
	require.Equal(t, 2, b.count(t, b.a, "SELECT count(*) FROM workspace_snapshot_entries"))
}

func (b *bundle) tree(t *testing.T, p workspacetest.Project) string {
	t.Helper()
	var h string
	require.NoError(t, b.in(t, p, func(ctx context.Context, tx *db.Tx) (err error) {
		h, err = workspace.TreeHash(ctx, tx, p.TenantID, p.ProjectID)
		return err
	}))
	return h
}
