package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// Event types of workspace state consistency.
const (
	EventSnapshotCreated = "state.snapshot_created"
	EventCommitted       = "state.committed"
	EventRolledBack      = "state.rolled_back"
	EventKept            = "state.kept"
)

// Snapshot kinds and states (table workspace_snapshots).
const (
	SnapshotKindRun     = "run"
	SnapshotKindManual  = "manual"
	SnapshotKindRestore = "restore"

	SnapshotOpen       = "open"
	SnapshotCommitted  = "committed"
	SnapshotRolledBack = "rolled_back"
	SnapshotKept       = "kept"
)

// Origin says which run and tool call a workspace change belongs to. Changes made with an
// origin in their context are journalled with their inverses, and the run's first change takes
// the run's snapshot first (in the same transaction).
type Origin struct {
	RunID      uuid.UUID
	ToolCallID uuid.UUID
	// Scope and Pub write the state.snapshot_created event; a nil Pub writes none.
	Scope events.Scope
	Pub   *events.Publisher
}

type originKey struct{}

// ForRun returns ctx carrying the origin of a run's tool call: the executor wraps the context
// a mutating tool runs in with it.
func ForRun(ctx context.Context, pub *events.Publisher, scope events.Scope, toolCallID uuid.UUID) context.Context {
	return context.WithValue(ctx, originKey{}, Origin{RunID: scope.RunID, ToolCallID: toolCallID, Scope: scope, Pub: pub})
}

func originFrom(ctx context.Context) (Origin, bool) {
	o, ok := ctx.Value(originKey{}).(Origin)
	return o, ok && o.RunID != uuid.Nil
}

// beforeChange runs before every change: a run's first change takes the run's snapshot.
func (s *Store) beforeChange(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID) error {
	o, ok := originFrom(ctx)
	if !ok {
		return nil
	}
	_, err := tx.Q.WorkspaceSnapshotByRun(ctx, dbsqlc.WorkspaceSnapshotByRunParams{TenantID: tenantID, RunID: uuid.NullUUID{UUID: o.RunID, Valid: true}})
	if err == nil {
		return nil
	}
	if !db.IsNoRows(err) {
		return fmt.Errorf("run snapshot: %w", err)
	}
	snap, n, err := takeSnapshot(ctx, tx, tenantID, projectID, SnapshotKindRun, nil, o.RunID)
	if err != nil {
		return err
	}
	if o.Pub != nil {
		if _, err := o.Pub.Append(ctx, tx, o.Scope, events.New{Type: EventSnapshotCreated, Data: map[string]any{
			"snapshotId": snap.ID, "projectId": projectID, "files": n,
		}}); err != nil {
			return err
		}
	}
	return nil
}

// takeSnapshot records the manifest of the project's files as they are now.
func takeSnapshot(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, kind string, label *string, runID uuid.UUID) (dbsqlc.WorkspaceSnapshot, int64, error) {
	state := SnapshotCommitted
	rid := uuid.NullUUID{}
	if runID != uuid.Nil {
		state, rid = SnapshotOpen, uuid.NullUUID{UUID: runID, Valid: true}
	}
	snap, err := tx.Q.WorkspaceSnapshotInsert(ctx, dbsqlc.WorkspaceSnapshotInsertParams{
		TenantID: tenantID, ID: uuid.New(), ProjectID: projectID, Kind: kind, Label: label, RunID: rid, State: state,
	})
	if err != nil {
		return snap, 0, fmt.Errorf("insert snapshot: %w", err)
	}
	n, err := tx.Q.WorkspaceSnapshotFill(ctx, dbsqlc.WorkspaceSnapshotFillParams{TenantID: tenantID, SnapshotID: snap.ID, ProjectID: projectID})
	if err != nil {
		return snap, 0, fmt.Errorf("fill snapshot: %w", err)
	}
	return snap, n, nil
}

// afterChange records a change of p from before (nil: the file did not exist) to after (nil:
// deleted; content is then ignored): the blob, the file's next version and, for a run, the
// journal entry with its inverse. cur is the version workspace_files holds now (0 after a
// delete); it is corrected when history knows a later one (a re-created file). It returns the
// file's version.
func (s *Store) afterChange(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, p string, before, after []byte, content string, cur int) (int, error) {
	if after != nil {
		if err := tx.Q.WorkspaceBlobPut(ctx, dbsqlc.WorkspaceBlobPutParams{TenantID: tenantID, Sha256: after, Content: content, Size: int32(len(content))}); err != nil {
			return 0, fmt.Errorf("store blob: %w", err)
		}
	}
	last, err := tx.Q.WorkspaceVersionMax(ctx, dbsqlc.WorkspaceVersionMaxParams{TenantID: tenantID, ProjectID: projectID, Path: p})
	if err != nil {
		return 0, fmt.Errorf("last version of %s: %w", p, err)
	}
	next := max(int(last)+1, cur)
	if after != nil && next != cur {
		if err := tx.Q.WorkspaceFileSetVersion(ctx, dbsqlc.WorkspaceFileSetVersionParams{TenantID: tenantID, ProjectID: projectID, Path: p, Version: int32(next)}); err != nil {
			return 0, fmt.Errorf("set version of %s: %w", p, err)
		}
	}
	o, isRun := originFrom(ctx)
	runID, callID := uuid.NullUUID{}, uuid.NullUUID{}
	if isRun {
		runID = uuid.NullUUID{UUID: o.RunID, Valid: true}
		callID = uuid.NullUUID{UUID: o.ToolCallID, Valid: o.ToolCallID != uuid.Nil}
	}
	if err := tx.Q.WorkspaceVersionInsert(ctx, dbsqlc.WorkspaceVersionInsertParams{
		TenantID: tenantID, ProjectID: projectID, Path: p, Version: int32(next), Sha256: after, RunID: runID, ToolCallID: callID,
	}); err != nil {
		return 0, fmt.Errorf("record version of %s: %w", p, err)
	}
	if isRun {
		op := "write"
		if after == nil {
			op = "delete"
		}
		if err := tx.Q.WorkspaceJournalInsert(ctx, dbsqlc.WorkspaceJournalInsertParams{
			TenantID: tenantID, ProjectID: projectID, RunID: o.RunID, ToolCallID: callID, Op: op, Path: p, BeforeSha: before, AfterSha: after,
		}); err != nil {
			return 0, fmt.Errorf("journal %s of %s: %w", op, p, err)
		}
	}
	return next, nil
}

// currentSHA returns the blob of the file p, locked, or nil when it does not exist.
func currentSHA(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, p string) ([]byte, error) {
	sum, err := tx.Q.WorkspaceFileShaGet(ctx, dbsqlc.WorkspaceFileShaGetParams{TenantID: tenantID, ProjectID: projectID, Path: p})
	if db.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return sum, nil
}

// setFile makes p hold the blob sum (nil: deletes p) without any origin: restores and rollbacks.
// It is a no-op when p holds it already.
func (s *Store) setFile(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, p string, sum []byte) error {
	cur, err := currentSHA(ctx, tx, tenantID, projectID, p)
	if err != nil {
		return err
	}
	if bytes.Equal(cur, sum) {
		return nil
	}
	if sum == nil {
		return s.Delete(ctx, tx, tenantID, projectID, p)
	}
	content, err := tx.Q.WorkspaceBlobGet(ctx, dbsqlc.WorkspaceBlobGetParams{TenantID: tenantID, Sha256: sum})
	if err != nil {
		return fmt.Errorf("blob %s of %s: %w", hex.EncodeToString(sum), p, err)
	}
	// Restores bypass the file-count limit check only in that they restore what was there.
	_, err = s.Write(ctx, tx, tenantID, projectID, p, content)
	return err
}

// TreeHash is a digest of a project's whole workspace (paths and contents), for comparing
// states: ManifestHash of its files.
func TreeHash(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID) (string, error) {
	rows, err := tx.Q.WorkspaceFileShas(ctx, dbsqlc.WorkspaceFileShasParams{TenantID: tenantID, ProjectID: projectID})
	if err != nil {
		return "", err
	}
	m := make(map[string][]byte, len(rows))
	for _, r := range rows {
		m[r.Path] = r.Sha256
	}
	return ManifestHash(m), nil
}

// ManifestHash is the digest of a workspace given as path -> SHA-256 of the content: the paths
// in byte order, each with its content's hash.
func ManifestHash(m map[string][]byte) string {
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%x\n", p, m[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AttributeTo returns ctx with its run origin (if any) moved to the run of scope: the changes
// are journalled, snapshotted and undone as that run's, with the same tool call. A team phase's
// tool calls are attributed to the team run, so the team run owns one snapshot and one journal
// across its phases.
func AttributeTo(ctx context.Context, scope events.Scope) context.Context {
	o, ok := originFrom(ctx)
	if !ok {
		return ctx
	}
	return ForRun(ctx, o.Pub, scope, o.ToolCallID)
}
