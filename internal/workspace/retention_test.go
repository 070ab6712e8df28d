package workspace_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/workspace"
	"github.com/agentry/agentry/internal/workspace/workspacetest"
)

func sum(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

// retention is a fixture for the retention job: a tenant with a user, runs in chosen states,
// and a way to age everything written so far.
type retention struct {
	*bundle
	ownerURL string
	svc      *workspace.Service
	userID   uuid.UUID
}

func setupRetention(t *testing.T) *retention {
	t.Helper()
	d, ownerURL := dbtest.Open(t)
	pa := workspacetest.NewTenant(t, d, 2)
	pb := workspacetest.NewTenant(t, d, 1)
	r := &retention{
		bundle:   &bundle{ctx: context.Background(), d: d, ws: &workspace.Store{}, a: pa[0], a2: pa[1], b: pb[0]},
		ownerURL: ownerURL,
		userID:   uuid.Must(uuid.NewV7()),
	}
	r.svc = workspace.NewService(d, r.ws, nil, nil)
	require.NoError(t, r.in(t, r.a, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: r.userID, Email: r.userID.String() + "@example.com"}); err != nil {
			return err
		}
		_, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: r.a.TenantID, UserID: r.userID, Role: "OWNER"})
		return err
	}))
	return r
}

// run inserts a run of tenant A in status.
func (r *retention) run(t *testing.T, status run.Status) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, r.in(t, r.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.RunInsert(ctx, dbsqlc.RunInsertParams{TenantID: r.a.TenantID, ID: id, UserID: r.userID, Kind: "TASK", Status: status, MaxAttempts: 1})
		return err
	}))
	return id
}

// asRun writes, as run runID, each path -> content ("" deletes it).
func (r *retention) asRun(t *testing.T, runID uuid.UUID, changes ...[2]string) {
	t.Helper()
	require.NoError(t, r.in(t, r.a, func(ctx context.Context, tx *db.Tx) error {
		rctx := workspace.ForRun(ctx, nil, events.Scope{TenantID: r.a.TenantID, RunID: runID}, uuid.Nil)
		for _, c := range changes {
			var err error
			if c[1] == "" {
				err = r.ws.Delete(rctx, tx, r.a.TenantID, r.a.ProjectID, c[0])
			} else {
				_, err = r.ws.Write(rctx, tx, r.a.TenantID, r.a.ProjectID, c[0], c[1])
			}
			if err != nil {
				return err
			}
		}
		return nil
	}))
}

// age moves everything of every tenant written so far back by d.
func (r *retention) age(t *testing.T, d time.Duration) {
	t.Helper()
	pool, err := pgxpool.New(r.ctx, r.ownerURL)
	require.NoError(t, err)
	defer pool.Close()
	tx, err := pool.Begin(r.ctx)
	require.NoError(t, err)
	defer tx.Rollback(r.ctx)
	_, err = tx.Exec(r.ctx, `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	for _, sql := range []string{
		`UPDATE workspace_blobs SET created_at = created_at - $1::interval, used_at = used_at - $1::interval`,
		`UPDATE workspace_file_versions SET created_at = created_at - $1::interval`,
		`UPDATE workspace_snapshots SET created_at = created_at - $1::interval`,
		`UPDATE workspace_journal SET created_at = created_at - $1::interval`,
	} {
		_, err := tx.Exec(r.ctx, sql, d.String())
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(r.ctx))
}

// versions returns path -> version numbers of tenant A's default project.
func (r *retention) versions(t *testing.T, p workspacetest.Project, path string) []int32 {
	t.Helper()
	var out []int32
	require.NoError(t, r.in(t, p, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.WorkspaceVersionList(ctx, dbsqlc.WorkspaceVersionListParams{TenantID: p.TenantID, ProjectID: p.ProjectID, Path: path})
		for _, row := range rows {
			out = append(out, row.Version)
		}
		return err
	}))
	return out
}

func (r *retention) blobs(t *testing.T, p workspacetest.Project) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	require.NoError(t, r.in(t, p, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Query(ctx, `SELECT encode(sha256, 'hex') FROM workspace_blobs`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h string
			if err := rows.Scan(&h); err != nil {
				return err
			}
			out[h] = true
		}
		return rows.Err()
	}))
	return out
}

// Retention prunes snapshots, versions, journal entries and blobs older than the cutoff, in
// every tenant, but never a file's latest version, a blob still referred to, or anything of a
// run that has not ended or whose rollback question waits; what it keeps still rolls back.
func TestRetentionPrunes(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	actor := auth.WithActor(r.ctx, auth.Actor{UserID: r.userID, TenantID: r.a.TenantID, Role: auth.RoleOwner})

	// History without runs: f.txt one -> two -> three; d.txt created then deleted; a manual
	// snapshot taken while f.txt held "two".
	r.write(t, r.a, "f.txt", "one")
	r.write(t, r.a, "f.txt", "two")
	r.write(t, r.a, "d.txt", "dee")
	old, err := r.svc.CreateSnapshot(actor, r.a.ProjectID, "old")
	require.NoError(t, err)
	r.write(t, r.a, "f.txt", "three")
	require.NoError(t, r.in(t, r.a, func(ctx context.Context, tx *db.Tx) error {
		return r.ws.Delete(ctx, tx, r.a.TenantID, r.a.ProjectID, "d.txt")
	}))
	r.write(t, r.a, "g.txt", "g0")
	// A completed run (decided), a failed one whose rollback question waits, a running one.
	done := r.run(t, run.StatusCompleted)
	r.asRun(t, done, [2]string{"h.txt", "h1"}, [2]string{"h.txt", "h2"})
	waiting := r.run(t, run.StatusFailed)
	r.asRun(t, waiting, [2]string{"g.txt", "g1"}, [2]string{"g.txt", "g2"})
	require.NoError(t, r.in(t, r.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.ApprovalInsert(ctx, dbsqlc.ApprovalInsertParams{TenantID: r.a.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: waiting,
			Kind: workspace.KindRollback, Data: []byte("{}"), CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)})
		return err
	}))
	running := r.run(t, run.StatusRunning)
	r.asRun(t, running, [2]string{"r.txt", "r1"})
	// The other tenant has old history too.
	r.write(t, r.b, "b.txt", "b1")
	r.write(t, r.b, "b.txt", "b2")

	r.age(t, 40*24*time.Hour)
	// Young history: a new version of f.txt and a manual snapshot, both kept.
	r.write(t, r.a, "f.txt", "four")
	young, err := r.svc.CreateSnapshot(actor, r.a.ProjectID, "young")
	require.NoError(t, err)
	treeBefore := r.tree(t, r.a)

	stats, err := r.svc.Prune(r.ctx, time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, stats.Tenants)

	// f.txt keeps only its young version; d.txt its deletion (the numbering goes on from it).
	require.Equal(t, []int32{4}, r.versions(t, r.a, "f.txt"))
	require.Equal(t, []int32{2}, r.versions(t, r.a, "d.txt"))
	require.Equal(t, []int32{2}, r.versions(t, r.a, "h.txt"), "the decided run's older version goes, its file's latest stays")
	require.Equal(t, []int32{2, 3}, r.versions(t, r.a, "g.txt"), "the versions of the run awaiting a decision stay")
	require.Equal(t, []int32{1}, r.versions(t, r.a, "r.txt"))
	require.Equal(t, []int32{2}, r.versions(t, r.b, "b.txt"), "the other tenant is pruned too")

	snaps, err := r.svc.Snapshots(actor, r.a.ProjectID)
	require.NoError(t, err)
	kept := map[uuid.UUID]bool{}
	for _, s := range snaps {
		kept[s.ID] = true
		if s.RunID.Valid {
			require.Contains(t, []uuid.UUID{waiting, running}, s.RunID.UUID, "only the snapshots of runs awaiting a decision stay")
		}
	}
	require.False(t, kept[old.ID], "the old manual snapshot is gone")
	require.True(t, kept[young.ID])
	require.Len(t, snaps, 3)
	_, err = r.svc.Snapshot(actor, old.ID)
	requireCode(t, err, "NOT_FOUND", "snapshot")

	blobs := r.blobs(t, r.a)
	for _, gone := range []string{"one", "two", "dee", "h1"} {
		require.False(t, blobs[sum(gone)], "blob %q is referred to by nothing and old", gone)
	}
	// "three" is in the manifests of the kept run snapshots.
	for _, kept := range []string{"three", "four", "h2", "g0", "g1", "g2", "r1"} {
		require.True(t, blobs[sum(kept)], "blob %q is still needed", kept)
	}
	require.Equal(t, map[string]bool{sum("b2"): true}, r.blobs(t, r.b))
	require.Equal(t, treeBefore, r.tree(t, r.a), "pruning history changes no file")

	// Nothing of the waiting run was lost: its journal still undoes it to the byte.
	var journal []dbsqlc.WorkspaceJournal
	require.NoError(t, r.in(t, r.a, func(ctx context.Context, tx *db.Tx) (err error) {
		journal, err = tx.Q.WorkspaceJournalByRun(ctx, dbsqlc.WorkspaceJournalByRunParams{TenantID: r.a.TenantID, RunID: waiting})
		return err
	}))
	require.Len(t, journal, 2)
	require.Equal(t, sum("g0"), hex.EncodeToString(journal[0].BeforeSha))

	// A second prune finds nothing more.
	again, err := r.svc.Prune(r.ctx, time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.Zero(t, again.Snapshots+again.Versions+again.Journal+again.Blobs, "%+v", again)

	// A file re-created after its history was pruned goes on after its last version.
	require.Equal(t, 3, r.write(t, r.a, "d.txt", "again"))
}

// The periodic job prunes with its retention; its output says what it deleted.
func TestRetentionWorker(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	r.write(t, r.a, "f.txt", "one")
	r.write(t, r.a, "f.txt", "two")
	r.age(t, 2*time.Hour)

	pool, err := pgxpool.New(r.ctx, r.ownerURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(r.ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })

	// A retention longer than the history's age keeps everything.
	w := rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{}, &workspace.PruneWorker{Service: r.svc, Retention: 3 * time.Hour})
	res, err := w.Work(r.ctx, t, tx, workspace.PruneArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, "maintenance", res.Job.Queue)
	require.Equal(t, []int32{1, 2}, r.versions(t, r.a, "f.txt"))

	w = rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{}, &workspace.PruneWorker{Service: r.svc, Retention: time.Hour})
	res, err = w.Work(r.ctx, t, tx, workspace.PruneArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, []int32{2}, r.versions(t, r.a, "f.txt"))
	require.JSONEq(t, `{"tenants":1,"snapshots":0,"versions":1,"journal":0,"blobs":1}`, string(res.Job.Output()))
}

// A diff between snapshots of two projects is BAD_USER_INPUT; labels are trimmed.
func TestSnapshotDiffAcrossProjects(t *testing.T) {
	t.Parallel()
	r := setupRetention(t)
	actor := auth.WithActor(r.ctx, auth.Actor{UserID: r.userID, TenantID: r.a.TenantID, Role: auth.RoleOwner})
	r.write(t, r.a, "f.txt", "one")
	r.write(t, r.a2, "f.txt", "two")
	a, err := r.svc.CreateSnapshot(actor, r.a.ProjectID, "  first  ")
	require.NoError(t, err)
	require.Equal(t, "first", *a.Label)
	b, err := r.svc.CreateSnapshot(actor, r.a2.ProjectID, "   ")
	require.NoError(t, err)
	require.Nil(t, b.Label, "a blank label is no label")
	_, err = r.svc.SnapshotDiff(actor, a.ID, b.ID)
	requireCode(t, err, "BAD_USER_INPUT", "another project")
	d, err := r.svc.SnapshotDiff(actor, a.ID, a.ID)
	require.NoError(t, err)
	require.Empty(t, d)
}
