// Package workspacetest holds fixtures for tests of the workspace and of the tools over it: a
// corpus of paths every workspace operation must refuse, a factory for tenants with projects,
// and a snapshot of the whole workspace_files table.
package workspacetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/workspace"
)

// BadPath is a path every operation refuses, with the reason NormalizePath gives.
type BadPath struct {
	Path   string
	Reason string
}

// BadPaths returns traversal attempts and malformed paths that are refused both as file paths
// and as listing or search prefixes.
func BadPaths() []BadPath {
	return []BadPath{
		// Traversal, before or after cleaning.
		{"..", workspace.ReasonDotDot},
		{"../x", workspace.ReasonDotDot},
		{"../../etc/passwd", workspace.ReasonDotDot},
		{"a/../../x", workspace.ReasonDotDot},
		{"a/..", workspace.ReasonDotDot},
		{"a/../b", workspace.ReasonDotDot},
		{"./..", workspace.ReasonDotDot},
		{"./../x", workspace.ReasonDotDot},
		{"a//b/../../..", workspace.ReasonDotDot},
		{"a/b/c/../../../../x", workspace.ReasonDotDot},
		{"../", workspace.ReasonDotDot},
		{"..//x", workspace.ReasonDotDot},
		{"a/./../b", workspace.ReasonDotDot},
		{".././x", workspace.ReasonDotDot},
		{"x/../../../../../../../../etc/shadow", workspace.ReasonDotDot},
		{strings.Repeat("../", 300), workspace.ReasonDotDot},
		// Absolute paths.
		{"/etc/passwd", workspace.ReasonAbsolute},
		{"/", workspace.ReasonAbsolute},
		{"//server/share", workspace.ReasonAbsolute},
		{"/tmp/../etc", workspace.ReasonAbsolute},
		{"///x", workspace.ReasonAbsolute},
		{"/./x", workspace.ReasonAbsolute},
		{"/root/.ssh/authorized_keys", workspace.ReasonAbsolute},
		// Windows separators, drives and shares.
		{`..\..\windows`, workspace.ReasonBackslash},
		{`C:\Windows\x`, workspace.ReasonBackslash},
		{`\\server\share`, workspace.ReasonBackslash},
		{`a\b`, workspace.ReasonBackslash},
		{`\etc\passwd`, workspace.ReasonBackslash},
		{`..\x`, workspace.ReasonBackslash},
		{`a/..\..\b`, workspace.ReasonBackslash},
		{`\\?\C:\x`, workspace.ReasonBackslash},
		{"C:/Windows/x", workspace.ReasonDriveLetter},
		{"c:x", workspace.ReasonDriveLetter},
		{"Z:", workspace.ReasonDriveLetter},
		// Home-directory expansion.
		{"~/.ssh/id_rsa", workspace.ReasonHome},
		{"~", workspace.ReasonHome},
		{"~root/.bashrc", workspace.ReasonHome},
		{"~/", workspace.ReasonHome},
		// Control and invisible characters.
		{"a/\x00b", workspace.ReasonControlChar},
		{"a\x00", workspace.ReasonControlChar},
		{"\x00", workspace.ReasonControlChar},
		{"a\x00/../../x", workspace.ReasonControlChar},
		{"a\nb", workspace.ReasonControlChar},
		{"a\rb", workspace.ReasonControlChar},
		{"a\tb", workspace.ReasonControlChar},
		{"x\x1b[31m", workspace.ReasonControlChar},
		{"a\x7f", workspace.ReasonControlChar},
		{"a\u0085b", workspace.ReasonControlChar},
		{"a\u202eb", workspace.ReasonControlChar},
		{"\ufeffa", workspace.ReasonControlChar},
		{"a\u200bb", workspace.ReasonControlChar},
		{"a\u2028b", workspace.ReasonControlChar},
		// Invalid UTF-8 (and the replacement character it becomes in JSON).
		{"a\xffb", workspace.ReasonInvalidUTF8},
		{"\xc0\xaf", workspace.ReasonInvalidUTF8},
		{"\xc0\xae\xc0\xae/x", workspace.ReasonInvalidUTF8},
		{"\xed\xa0\x80", workspace.ReasonInvalidUTF8},
		{"a\xe2\x82", workspace.ReasonInvalidUTF8},
		{"a\ufffdb", workspace.ReasonInvalidUTF8},
		// Length.
		{strings.Repeat("a/", 1000), workspace.ReasonTooLong},
		{strings.Repeat("a", 1025), workspace.ReasonTooLong},
		{strings.Repeat("../", 400), workspace.ReasonTooLong},
		{"x/" + strings.Repeat("a", 300), workspace.ReasonSegmentTooLong},
		{strings.Repeat("b", 256), workspace.ReasonSegmentTooLong},
		{strings.Repeat("é", 128) + "/x", workspace.ReasonSegmentTooLong},
		// Names Windows would strip.
		{"a./b", workspace.ReasonTrailingDot},
		{"x ", workspace.ReasonTrailingDot},
		{"dir/file.", workspace.ReasonTrailingDot},
		{"...", workspace.ReasonTrailingDot},
		{"a/ /b", workspace.ReasonTrailingDot},
		{". /x", workspace.ReasonTrailingDot},
		{".. /x", workspace.ReasonTrailingDot},
	}
}

// BadFilePaths returns paths refused as file paths but valid as prefixes (they name the root or
// a directory).
func BadFilePaths() []BadPath {
	return []BadPath{
		{"", workspace.ReasonEmpty},
		{".", workspace.ReasonRoot},
		{"./.", workspace.ReasonRoot},
		{".//.", workspace.ReasonRoot},
		{"./", workspace.ReasonDirectory},
		{"a/", workspace.ReasonDirectory},
		{"dir/sub/", workspace.ReasonDirectory},
	}
}

// Project names one project of one tenant.
type Project struct {
	TenantID  uuid.UUID
	ProjectID uuid.UUID
}

// NewTenant creates a tenant with n projects (the first is the default) and returns them.
func NewTenant(t testing.TB, d *db.DB, n int) []Project {
	t.Helper()
	ctx := context.Background()
	tenantID := uuid.Must(uuid.NewV7())
	var out []Project
	require.NoError(t, d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenantID, Name: "tenant " + tenantID.String()[:8]}); err != nil {
			return err
		}
		for i := range n {
			p, err := tx.Q.ProjectInsert(ctx, dbsqlc.ProjectInsertParams{
				TenantID: tenantID, ID: uuid.Must(uuid.NewV7()), Name: fmt.Sprintf("project %d", i), IsDefault: i == 0,
			})
			if err != nil {
				return err
			}
			out = append(out, Project{TenantID: tenantID, ProjectID: p.ID})
		}
		return nil
	}))
	return out
}

// Row is one workspace_files row as a snapshot sees it.
type Row struct {
	TenantID  uuid.UUID
	ProjectID uuid.UUID
	Path      string
	Size      int32
	SHA256    []byte
	Version   int32
	UpdatedAt time.Time
}

// snapshotSQL reads the whole table across tenants. It exists only for tests: no application
// code lists every tenant's files.
const snapshotSQL = `
SELECT tenant_id, project_id, path, size, sha256, version, updated_at
FROM workspace_files
ORDER BY tenant_id, project_id, path COLLATE "C"`

// Snapshot returns every row of workspace_files, of every tenant, in a system transaction.
func Snapshot(t testing.TB, d *db.DB) []Row {
	t.Helper()
	var out []Row
	require.NoError(t, d.InSystemTx(context.Background(), "test snapshot", func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Query(ctx, snapshotSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r Row
			if err := rows.Scan(&r.TenantID, &r.ProjectID, &r.Path, &r.Size, &r.SHA256, &r.Version, &r.UpdatedAt); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	}))
	return out
}

// RequireSameRows fails t unless two snapshots hold the same rows.
func RequireSameRows(t testing.TB, want, got []Row) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, w.TenantID == g.TenantID && w.ProjectID == g.ProjectID && w.Path == g.Path &&
			w.Size == g.Size && bytes.Equal(w.SHA256, g.SHA256) && w.Version == g.Version && w.UpdatedAt.Equal(g.UpdatedAt),
			"row %d changed: was %+v, is %+v", i, w, g)
	}
}
