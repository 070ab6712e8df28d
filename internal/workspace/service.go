package workspace

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/status"
)

// Rollback choices (resolveRollback).
const (
	ChoiceRollback = "ROLLBACK"
	ChoiceKeep     = "KEEP"
	ChoiceContinue = "CONTINUE"
)

// KindRollback is the approval kind of the rollback question (approval.KindRollback).
const KindRollback = "rollback"

// The statuses of an approval (approval.StatusPending, ...: internal/approval depends on this
// package through the tools).
const (
	approvalPending  status.Approval = "PENDING"
	approvalApproved status.Approval = "APPROVED"
	approvalRejected status.Approval = "REJECTED"
	approvalExpired  status.Approval = "EXPIRED"
)

// Asker asks a person about a run that has ended (approval.Service.RequestForEnded).
type Asker interface {
	RequestForEnded(ctx context.Context, tx *db.Tx, r dbsqlc.Run, kind, question string, data map[string]any) (dbsqlc.Approval, error)
}

// Service is the history side of the workspace for the API and the run lifecycle: files,
// versions, snapshots, diffs, and what happens to a run's changes when it ends.
type Service struct {
	db    *db.DB
	store *Store
	runs  *run.Service
	asker Asker
}

// NewService returns the workspace history service. asker may be nil (no rollback questions).
func NewService(d *db.DB, store *Store, runs *run.Service, asker Asker) *Service {
	return &Service{db: d, store: store, runs: runs, asker: asker}
}

// Version is one recorded state of a file; Deleted versions have no content.
type Version struct {
	Version    int
	Deleted    bool
	Size       int
	SHA256     []byte
	RunID      uuid.NullUUID
	ToolCallID uuid.NullUUID
	CreatedAt  time.Time
}

// Snapshot is a recorded manifest of a project's workspace.
type Snapshot = dbsqlc.WorkspaceSnapshot

// Project returns the caller's project id: projectID, or the default project when nil.
// Another tenant's project, or a missing one, is NOT_FOUND.
func (s *Service) Project(ctx context.Context, projectID *uuid.UUID) (uuid.UUID, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return uuid.Nil, err
	}
	var id uuid.UUID
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var p dbsqlc.Project
		var err error
		if projectID == nil {
			p, err = tx.Q.ProjectGetDefault(ctx, a.TenantID)
		} else {
			p, err = tx.Q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: a.TenantID, ID: *projectID})
		}
		id = p.ID
		return err
	})
	if db.IsNoRows(err) {
		return uuid.Nil, apperr.NotFoundf("project")
	}
	return id, err
}

func (s *Service) read(ctx context.Context, fn func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error) error {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error { return fn(ctx, tx, a.TenantID) })
}

func (s *Service) write(ctx context.Context, fn func(ctx context.Context, tx *db.Tx, a auth.Actor) error) error {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error { return fn(ctx, tx, a) })
}

// Files lists every file of the project (at most MaxListLimit).
func (s *Service) Files(ctx context.Context, projectID uuid.UUID) ([]FileInfo, error) {
	var out []FileInfo
	err := s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		l, err := s.store.List(ctx, tx, tenantID, projectID, "", MaxListLimit)
		out = l.Files
		return err
	})
	return out, err
}

// File returns the file at path, found false when there is none.
func (s *Service) File(ctx context.Context, projectID uuid.UUID, path string) (File, bool, error) {
	var f File
	err := s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		var err error
		f, err = s.store.Read(ctx, tx, tenantID, projectID, path)
		return err
	})
	if e, ok := apperr.As(err); ok && e.Code == apperr.NotFound {
		return f, false, nil
	}
	return f, err == nil, err
}

// Versions lists the recorded versions of path, oldest first.
func (s *Service) Versions(ctx context.Context, projectID uuid.UUID, path string) ([]Version, error) {
	p, err := NormalizePath(path)
	if err != nil {
		return nil, err
	}
	var out []Version
	err = s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		rows, err := tx.Q.WorkspaceVersionList(ctx, dbsqlc.WorkspaceVersionListParams{TenantID: tenantID, ProjectID: projectID, Path: p})
		for _, r := range rows {
			out = append(out, Version{Version: int(r.Version), Deleted: r.Sha256 == nil, Size: int(r.Size), SHA256: r.Sha256,
				RunID: r.RunID, ToolCallID: r.ToolCallID, CreatedAt: r.CreatedAt})
		}
		return err
	})
	return out, err
}

// Snapshots lists the project's snapshots, newest first.
func (s *Service) Snapshots(ctx context.Context, projectID uuid.UUID) ([]Snapshot, error) {
	var out []Snapshot
	err := s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		var err error
		out, err = tx.Q.WorkspaceSnapshotList(ctx, dbsqlc.WorkspaceSnapshotListParams{TenantID: tenantID, ProjectID: projectID})
		return err
	})
	return out, err
}

// Snapshot returns one snapshot, or NOT_FOUND.
func (s *Service) Snapshot(ctx context.Context, id uuid.UUID) (Snapshot, error) {
	var out Snapshot
	err := s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		var err error
		out, err = getSnapshot(ctx, tx, tenantID, id)
		return err
	})
	return out, err
}

func getSnapshot(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID) (Snapshot, error) {
	sn, err := tx.Q.WorkspaceSnapshotGet(ctx, dbsqlc.WorkspaceSnapshotGetParams{TenantID: tenantID, ID: id})
	if db.IsNoRows(err) {
		return sn, apperr.NotFoundf("snapshot")
	}
	return sn, err
}

// FileDiff returns the unified diff of path from version from to version to (a deleted
// version reads as empty). A version below 1 is BAD_USER_INPUT; one that does not exist (or was
// pruned) is NOT_FOUND.
func (s *Service) FileDiff(ctx context.Context, projectID uuid.UUID, path string, from, to int) (string, error) {
	p, err := NormalizePath(path)
	if err != nil {
		return "", err
	}
	if err := checkVersion("fromVersion", from); err != nil {
		return "", err
	}
	if err := checkVersion("toVersion", to); err != nil {
		return "", err
	}
	var out string
	err = s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		get := func(v int) (string, error) {
			r, err := tx.Q.WorkspaceVersionGet(ctx, dbsqlc.WorkspaceVersionGetParams{TenantID: tenantID, ProjectID: projectID, Path: p, Version: int32(v)})
			if db.IsNoRows(err) {
				return "", apperr.NotFoundf(fmt.Sprintf("version %d of %q", v, p)).With("path", p).With("version", v)
			}
			return r.Content, err
		}
		a, err := get(from)
		if err != nil {
			return err
		}
		b, err := get(to)
		if err != nil {
			return err
		}
		out = UnifiedDiff(fmt.Sprintf("a/%s@%d", p, from), fmt.Sprintf("b/%s@%d", p, to), a, b)
		return nil
	})
	return out, err
}

// SnapshotDiff returns the unified diffs of every file that differs between two snapshots of
// one project, in path order ("/dev/null" names a side where the file is absent).
func (s *Service) SnapshotDiff(ctx context.Context, from, to uuid.UUID) (string, error) {
	var out bytes.Buffer
	err := s.read(ctx, func(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) error {
		a, err := getSnapshot(ctx, tx, tenantID, from)
		if err != nil {
			return err
		}
		b, err := getSnapshot(ctx, tx, tenantID, to)
		if err != nil {
			return err
		}
		if a.ProjectID != b.ProjectID {
			return apperr.Invalid("to", "is a snapshot of another project")
		}
		ma, err := manifest(ctx, tx, tenantID, a.ID)
		if err != nil {
			return err
		}
		mb, err := manifest(ctx, tx, tenantID, b.ID)
		if err != nil {
			return err
		}
		return writeTreeDiff(ctx, tx, tenantID, &out, ma, mb)
	})
	return out.String(), err
}

func manifest(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID) (map[string][]byte, error) {
	rows, err := tx.Q.WorkspaceSnapshotEntries(ctx, dbsqlc.WorkspaceSnapshotEntriesParams{TenantID: tenantID, SnapshotID: id})
	if err != nil {
		return nil, err
	}
	m := make(map[string][]byte, len(rows))
	for _, r := range rows {
		m[r.Path] = r.Sha256
	}
	return m, nil
}

func writeTreeDiff(ctx context.Context, tx *db.Tx, tenantID uuid.UUID, out *bytes.Buffer, ma, mb map[string][]byte) error {
	var paths []string
	for p := range ma {
		paths = append(paths, p)
	}
	for p := range mb {
		if _, ok := ma[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	blob := func(sum []byte) (string, error) {
		if sum == nil {
			return "", nil
		}
		return tx.Q.WorkspaceBlobGet(ctx, dbsqlc.WorkspaceBlobGetParams{TenantID: tenantID, Sha256: sum})
	}
	compared := 0
	for i, p := range paths {
		sa, sb := ma[p], mb[p]
		if bytes.Equal(sa, sb) {
			continue
		}
		if compared > maxTreeDiffBytes {
			fmt.Fprintf(out, "[the diff stops here: the files before differ by more than %d bytes together; %d paths from %q on are not compared: ask fileDiff for them]\n", maxTreeDiffBytes, len(paths)-i, p)
			break
		}
		ta, err := blob(sa)
		if err != nil {
			return err
		}
		tb, err := blob(sb)
		if err != nil {
			return err
		}
		na, nb := "a/"+p, "b/"+p
		if sa == nil {
			na = "/dev/null"
		}
		if sb == nil {
			nb = "/dev/null"
		}
		compared += len(ta) + len(tb)
		d := UnifiedDiff(na, nb, ta, tb)
		if d == "" { // same text, different blobs cannot happen; an empty file appearing can
			d = fmt.Sprintf("--- %s\n+++ %s\n", na, nb)
		}
		out.WriteString(d)
	}
	return nil
}

// maxTreeDiffBytes bounds the file contents one snapshot diff compares (a few files of the
// largest size); the files after are named, not compared.
const maxTreeDiffBytes = 4 << 20

// MaxLabelLength is the longest snapshot label, in characters.
const MaxLabelLength = 200

// checkLabel trims a snapshot label and checks it: printable text of at most MaxLabelLength
// characters ("" is no label).
func checkLabel(label string) (string, error) {
	label = strings.TrimSpace(label)
	if n := utf8.RuneCountInString(label); n > MaxLabelLength {
		return "", apperr.Invalid("label", "is %d characters long; the limit is %d", n, MaxLabelLength)
	}
	if !utf8.ValidString(label) || strings.ContainsRune(label, utf8.RuneError) {
		return "", apperr.Invalid("label", "is not valid UTF-8 text")
	}
	for _, r := range label {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return "", apperr.Invalid("label", "contains the control or invisible character %U", r)
		}
	}
	return label, nil
}

// checkVersion refuses a version number that no file can have.
func checkVersion(field string, v int) error {
	if v < 1 || v > math.MaxInt32 {
		return apperr.Invalid(field, "must be a version number from 1 (got %d)", v).With("version", v)
	}
	return nil
}

// CreateSnapshot records the project's workspace as it is now (a committed, manual snapshot).
// The label is trimmed; see checkLabel.
func (s *Service) CreateSnapshot(ctx context.Context, projectID uuid.UUID, label string) (Snapshot, error) {
	label, err := checkLabel(label)
	if err != nil {
		return Snapshot{}, err
	}
	var out Snapshot
	err = s.write(ctx, func(ctx context.Context, tx *db.Tx, a auth.Actor) error {
		if _, err := tx.Q.WorkspaceLock(ctx, dbsqlc.WorkspaceLockParams{TenantID: a.TenantID, ID: projectID}); err != nil {
			if db.IsNoRows(err) {
				return apperr.NotFoundf("project")
			}
			return err
		}
		var l *string
		if label != "" {
			l = &label
		}
		var err error
		out, _, err = takeSnapshot(ctx, tx, a.TenantID, projectID, SnapshotKindManual, l, uuid.Nil)
		return err
	})
	return out, err
}

// RestoreSnapshot makes the project's workspace what snapshot id recorded, byte for byte. It
// first snapshots the current workspace (kind restore), so the restore can itself be undone by
// restoring that snapshot, which it returns.
func (s *Service) RestoreSnapshot(ctx context.Context, id uuid.UUID) (Snapshot, error) {
	var out Snapshot
	err := s.write(ctx, func(ctx context.Context, tx *db.Tx, a auth.Actor) error {
		sn, err := getSnapshot(ctx, tx, a.TenantID, id)
		if err != nil {
			return err
		}
		if _, err := tx.Q.WorkspaceLock(ctx, dbsqlc.WorkspaceLockParams{TenantID: a.TenantID, ID: sn.ProjectID}); err != nil {
			return err
		}
		label := "before restoring snapshot " + id.String()
		if out, _, err = takeSnapshot(ctx, tx, a.TenantID, sn.ProjectID, SnapshotKindRestore, &label, uuid.Nil); err != nil {
			return err
		}
		want, err := manifest(ctx, tx, a.TenantID, sn.ID)
		if err != nil {
			return err
		}
		return s.restoreTo(ctx, tx, a.TenantID, sn.ProjectID, want)
	})
	return out, err
}

// restoreTo makes the project's files exactly want (path -> blob).
func (s *Service) restoreTo(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, want map[string][]byte) error {
	rows, err := tx.Q.WorkspaceFileShas(ctx, dbsqlc.WorkspaceFileShasParams{TenantID: tenantID, ProjectID: projectID})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, ok := want[r.Path]; !ok {
			if err := s.store.setFile(ctx, tx, tenantID, projectID, r.Path, nil); err != nil {
				return err
			}
		}
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := s.store.setFile(ctx, tx, tenantID, projectID, p, want[p]); err != nil {
			return err
		}
	}
	return nil
}

// ReasonExpired is state.kept's reason when nobody answered the rollback question in time;
// ReasonChosen when the user chose KEEP.
const (
	ReasonExpired = "expired"
	ReasonChosen  = "chosen"
)

// RollbackExpired is the approval.ExpiryHook of the rollback question: an expiry is a decision
// to keep the run's changes. The run's snapshot, if still open, becomes kept, and it returns
// state.kept with the reason expired (retention may then prune the run's history).
func (s *Service) RollbackExpired(ctx context.Context, tx *db.Tx, ap dbsqlc.Approval, r dbsqlc.Run) ([]events.New, error) {
	sn, err := tx.Q.WorkspaceSnapshotByRun(ctx, dbsqlc.WorkspaceSnapshotByRunParams{TenantID: r.TenantID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true}})
	if db.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run snapshot: %w", err)
	}
	if sn.State != SnapshotOpen {
		return nil, nil
	}
	if _, err := tx.Q.WorkspaceSnapshotSetState(ctx, dbsqlc.WorkspaceSnapshotSetStateParams{TenantID: r.TenantID, ID: sn.ID, State: SnapshotKept}); err != nil {
		return nil, err
	}
	return []events.New{{Type: EventKept, Data: map[string]any{"snapshotId": sn.ID, "approvalId": ap.ID, "reason": ReasonExpired}}}, nil
}

// Finished is the run.FinishHook of every run kind: a completed run's snapshot is committed
// (state.committed); a failed, cancelled or timed-out run that changed its workspace asks its
// user, through an approval of kind rollback, whether to roll back, keep or continue.
func (s *Service) Finished(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
	sn, err := tx.Q.WorkspaceSnapshotByRun(ctx, dbsqlc.WorkspaceSnapshotByRunParams{TenantID: fin.TenantID, RunID: uuid.NullUUID{UUID: fin.ID, Valid: true}})
	if db.IsNoRows(err) {
		return nil // the run changed nothing
	}
	if err != nil {
		return fmt.Errorf("run snapshot: %w", err)
	}
	if sn.State != SnapshotOpen {
		return nil
	}
	if fin.Status == run.StatusCompleted {
		if _, err := tx.Q.WorkspaceSnapshotSetState(ctx, dbsqlc.WorkspaceSnapshotSetStateParams{TenantID: fin.TenantID, ID: sn.ID, State: SnapshotCommitted}); err != nil {
			return err
		}
		_, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(fin), events.New{Type: EventCommitted, Data: map[string]any{"snapshotId": sn.ID}})
		return err
	}
	if s.asker == nil {
		return nil
	}
	paths, err := s.changedPaths(ctx, tx, fin.TenantID, fin.ID)
	if err != nil {
		return err
	}
	_, err = s.asker.RequestForEnded(ctx, tx, fin, KindRollback,
		fmt.Sprintf("The run ended %s after changing %d workspace file(s). Roll the changes back, keep them, or continue the run?", fin.Status, len(paths)),
		map[string]any{"snapshotId": sn.ID, "paths": paths, "choices": []string{ChoiceRollback, ChoiceKeep, ChoiceContinue}})
	return err
}

// runChange is what a run did to one path: the state before its first operation and after its
// last.
type runChange struct {
	path        string
	first, last []byte
}

func (s *Service) runChanges(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID) ([]runChange, error) {
	rows, err := tx.Q.WorkspaceJournalByRun(ctx, dbsqlc.WorkspaceJournalByRunParams{TenantID: tenantID, RunID: runID})
	if err != nil {
		return nil, err
	}
	idx := map[string]int{}
	var out []runChange
	for _, r := range rows {
		i, ok := idx[r.Path]
		if !ok {
			i = len(out)
			idx[r.Path] = i
			out = append(out, runChange{path: r.Path, first: r.BeforeSha})
		}
		out[i].last = r.AfterSha
	}
	slices.SortFunc(out, func(a, b runChange) int {
		switch {
		case a.path < b.path:
			return -1
		case a.path > b.path:
			return 1
		}
		return 0
	})
	return out, nil
}

func (s *Service) changedPaths(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID) ([]string, error) {
	ch, err := s.runChanges(ctx, tx, tenantID, runID)
	paths := make([]string, len(ch))
	for i, c := range ch {
		paths[i] = c.path
	}
	return paths, err
}

// rollbackTx undoes every workspace operation of the run (the journal's inverses, newest first:
// each path returns to its state before the run's first operation on it). When a file is no
// longer what the run left (someone changed it since), it refuses with CONFLICT naming the
// file, having changed nothing.
func (s *Service) rollbackTx(ctx context.Context, tx *db.Tx, tenantID, projectID, runID uuid.UUID) (int, error) {
	if _, err := tx.Q.WorkspaceLock(ctx, dbsqlc.WorkspaceLockParams{TenantID: tenantID, ID: projectID}); err != nil {
		return 0, fmt.Errorf("lock workspace: %w", err)
	}
	changes, err := s.runChanges(ctx, tx, tenantID, runID)
	if err != nil {
		return 0, err
	}
	for _, c := range changes {
		cur, err := currentSHA(ctx, tx, tenantID, projectID, c.path)
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(cur, c.last) {
			return 0, apperr.New(apperr.Conflict, "cannot roll back: %q was changed after the run; nothing was rolled back", c.path).With("path", c.path)
		}
	}
	for i := len(changes) - 1; i >= 0; i-- {
		if err := s.store.setFile(ctx, tx, tenantID, projectID, changes[i].path, changes[i].first); err != nil {
			return 0, err
		}
	}
	return len(changes), nil
}

// ResolveRollback answers a rollback approval (MEMBER or higher; another tenant's is
// NOT_FOUND; one already decided is CONFLICT): ROLLBACK undoes the run's workspace changes
// (state.rolled_back; CONFLICT naming the file, and nothing changed, when a file was changed
// since), KEEP leaves them (state.kept), CONTINUE re-opens the run from its terminal status
// (runs.Resume; the run's snapshot stays open and is decided when the run ends again). The
// approval becomes APPROVED (ROLLBACK, CONTINUE) or REJECTED (KEEP) with the choice as its note.
func (s *Service) ResolveRollback(ctx context.Context, approvalID uuid.UUID, choice string) (dbsqlc.Approval, error) {
	switch choice {
	case ChoiceRollback, ChoiceKeep, ChoiceContinue:
	default:
		return dbsqlc.Approval{}, apperr.Invalid("choice", "must be ROLLBACK, KEEP or CONTINUE")
	}
	var out dbsqlc.Approval
	err := s.write(ctx, func(ctx context.Context, tx *db.Tx, a auth.Actor) error {
		ap, err := tx.Q.ApprovalGetForUpdate(ctx, dbsqlc.ApprovalGetForUpdateParams{TenantID: a.TenantID, ID: approvalID})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("approval")
		}
		if err != nil {
			return err
		}
		if ap.Kind != KindRollback {
			return apperr.Invalid("approvalId", "is a %s approval, not a rollback question; use resolveApproval", ap.Kind)
		}
		if ap.Status != approvalPending {
			return apperr.New(apperr.Conflict, "this approval was already decided: %s", ap.Status).With("status", ap.Status)
		}
		if !time.Now().Before(ap.ExpiresAt) {
			// The expiry sweep marks it EXPIRED; the changes stay as they are.
			return apperr.New(apperr.Conflict, "this question expired at %s; the run's changes were kept", ap.ExpiresAt.UTC().Format(time.RFC3339)).With("status", approvalExpired)
		}
		r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: a.TenantID, ID: ap.RunID})
		if err != nil {
			return fmt.Errorf("load run: %w", err)
		}
		if err := run.MayControl(ctx, tx, a, r, "answer the rollback question of"); err != nil {
			return err
		}
		sn, err := tx.Q.WorkspaceSnapshotByRun(ctx, dbsqlc.WorkspaceSnapshotByRunParams{TenantID: a.TenantID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true}})
		if err != nil {
			return fmt.Errorf("run snapshot: %w", err)
		}
		status := approvalApproved
		var news []events.New
		switch choice {
		case ChoiceRollback:
			n, err := s.rollbackTx(ctx, tx, a.TenantID, sn.ProjectID, r.ID)
			if err != nil {
				return err
			}
			if _, err := tx.Q.WorkspaceSnapshotSetState(ctx, dbsqlc.WorkspaceSnapshotSetStateParams{TenantID: a.TenantID, ID: sn.ID, State: SnapshotRolledBack}); err != nil {
				return err
			}
			news = append(news, events.New{Type: EventRolledBack, Data: map[string]any{"snapshotId": sn.ID, "files": n, "approvalId": ap.ID}})
		case ChoiceKeep:
			status = approvalRejected
			if _, err := tx.Q.WorkspaceSnapshotSetState(ctx, dbsqlc.WorkspaceSnapshotSetStateParams{TenantID: a.TenantID, ID: sn.ID, State: SnapshotKept}); err != nil {
				return err
			}
			news = append(news, events.New{Type: EventKept, Data: map[string]any{"snapshotId": sn.ID, "approvalId": ap.ID, "reason": ReasonChosen}})
		}
		note := choice
		out, err = tx.Q.ApprovalDecide(ctx, dbsqlc.ApprovalDecideParams{
			TenantID: a.TenantID, ID: ap.ID, Status: status, DecidedAt: time.Now().UTC(),
			DecidedBy: uuid.NullUUID{UUID: a.UserID, Valid: true}, Note: &note,
		})
		if err != nil {
			return fmt.Errorf("decide approval: %w", err)
		}
		resolved := events.New{Type: events.ApprovalResolved, Data: map[string]any{
			"approvalId": out.ID, "kind": out.Kind, "status": out.Status, "choice": choice, "decidedAt": out.DecidedAt, "decidedBy": a.UserID,
		}}
		if choice == ChoiceContinue {
			_, err := s.runs.Reopen(ctx, tx, a.TenantID, r.ID, resolved,
				events.New{Type: events.ExecutionResumed, Data: map[string]any{"reason": "rollback question: CONTINUE", "approvalId": out.ID}})
			return err
		}
		_, err = s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), append([]events.New{resolved}, news...)...)
		return err
	})
	return out, err
}

// RunDiff is the unified diff of what run runID changed in its workspace (its journal: each
// path from before the run's first change to after its last), inside tx; "" when it changed
// nothing.
func (s *Service) RunDiff(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID) (string, error) {
	changes, err := s.runChanges(ctx, tx, tenantID, runID)
	if err != nil {
		return "", err
	}
	before, after := map[string][]byte{}, map[string][]byte{}
	for _, c := range changes {
		if c.first != nil {
			before[c.path] = c.first
		}
		if c.last != nil {
			after[c.path] = c.last
		}
	}
	var out bytes.Buffer
	if err := writeTreeDiff(ctx, tx, tenantID, &out, before, after); err != nil {
		return "", err
	}
	return out.String(), nil
}
