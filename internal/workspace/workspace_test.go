package workspace_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/workspace"
	"github.com/agentry/agentry/internal/workspace/workspacetest"
)

// bundle is what a workspace test works with: a fresh database, a store, two projects of one
// tenant and one project of another.
type bundle struct {
	ctx   context.Context
	d     *db.DB
	ws    *workspace.Store
	a, a2 workspacetest.Project // tenant A's two projects
	b     workspacetest.Project // tenant B's project
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d, _ := dbtest.Open(t)
	pa := workspacetest.NewTenant(t, d, 2)
	pb := workspacetest.NewTenant(t, d, 1)
	return &bundle{ctx: context.Background(), d: d, ws: &workspace.Store{}, a: pa[0], a2: pa[1], b: pb[0]}
}

// in runs fn in a committed transaction of p's tenant and returns fn's error (the transaction
// commits even then, so that nothing a failed call wrote could hide behind a rollback).
func (b *bundle) in(t *testing.T, p workspacetest.Project, fn func(ctx context.Context, tx *db.Tx) error) error {
	t.Helper()
	var got error
	require.NoError(t, b.d.InTx(b.ctx, p.TenantID, func(ctx context.Context, tx *db.Tx) error {
		got = fn(ctx, tx)
		return nil
	}))
	return got
}

func (b *bundle) write(t *testing.T, p workspacetest.Project, path, content string) int {
	t.Helper()
	var v int
	require.NoError(t, b.in(t, p, func(ctx context.Context, tx *db.Tx) (err error) {
		v, err = b.ws.Write(ctx, tx, p.TenantID, p.ProjectID, path, content)
		return err
	}))
	return v
}

func (b *bundle) read(t *testing.T, p workspacetest.Project, path string) (workspace.File, error) {
	t.Helper()
	var f workspace.File
	err := b.in(t, p, func(ctx context.Context, tx *db.Tx) (err error) {
		f, err = b.ws.Read(ctx, tx, p.TenantID, p.ProjectID, path)
		return err
	})
	return f, err
}

func (b *bundle) edit(t *testing.T, p workspacetest.Project, path, old, new string, all bool) (int, int, error) {
	t.Helper()
	var v, n int
	err := b.in(t, p, func(ctx context.Context, tx *db.Tx) (err error) {
		v, n, err = b.ws.Edit(ctx, tx, p.TenantID, p.ProjectID, path, old, new, all)
		return err
	})
	return v, n, err
}

func (b *bundle) list(t *testing.T, p workspacetest.Project, prefix string, limit int) workspace.Listing {
	t.Helper()
	var l workspace.Listing
	require.NoError(t, b.in(t, p, func(ctx context.Context, tx *db.Tx) (err error) {
		l, err = b.ws.List(ctx, tx, p.TenantID, p.ProjectID, prefix, limit)
		return err
	}))
	return l
}

func (b *bundle) search(t *testing.T, p workspacetest.Project, query, prefix string, limit int) (workspace.SearchResult, error) {
	t.Helper()
	var r workspace.SearchResult
	err := b.in(t, p, func(ctx context.Context, tx *db.Tx) (err error) {
		r, err = b.ws.Search(ctx, tx, p.TenantID, p.ProjectID, query, prefix, limit)
		return err
	})
	return r, err
}

func paths(l workspace.Listing) []string {
	out := make([]string, len(l.Files))
	for i, f := range l.Files {
		out[i] = f.Path
	}
	return out
}

func requireCode(t *testing.T, err error, code apperr.Code, contains string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), contains)
}

func TestWriteReadRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 1, b.write(t, b.a, "./docs//readme.md", "hello\n"))
	f, err := b.read(t, b.a, "docs/readme.md")
	require.NoError(t, err)
	require.Equal(t, "docs/readme.md", f.Path)
	require.Equal(t, "hello\n", f.Content)
	require.Equal(t, 6, f.Size)
	require.Equal(t, 1, f.Version)
	require.Equal(t, sha256.Sum256([]byte("hello\n")), f.SHA256)
	require.False(t, f.UpdatedAt.IsZero())

	// Each write bumps the version, even with the same content; any spelling of the path
	// names the same file.
	require.Equal(t, 2, b.write(t, b.a, "docs/readme.md", "hello again\n"))
	require.Equal(t, 3, b.write(t, b.a, "docs/./readme.md", "hello again\n"))
	f, err = b.read(t, b.a, "./docs/readme.md")
	require.NoError(t, err)
	require.Equal(t, "hello again\n", f.Content)
	require.Equal(t, 3, f.Version)

	// Empty files and unicode survive.
	require.Equal(t, 1, b.write(t, b.a, "empty", ""))
	f, err = b.read(t, b.a, "empty")
	require.NoError(t, err)
	require.Equal(t, "", f.Content)
	require.Equal(t, 1, b.write(t, b.a, "ünï/çødé.txt", "naïve ☃\r\n"))
	f, err = b.read(t, b.a, "ünï/çødé.txt")
	require.NoError(t, err)
	require.Equal(t, "naïve ☃\r\n", f.Content)
	require.Equal(t, len("naïve ☃\r\n"), f.Size)

	_, err = b.read(t, b.a, "docs/missing.md")
	requireCode(t, err, apperr.NotFound, `file "docs/missing.md" not found`)
	// A directory is not a file.
	_, err = b.read(t, b.a, "docs")
	requireCode(t, err, apperr.NotFound, "not found")
}

func TestWriteRefusesBinaryContent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, "bin", "a\x00b")
		return err
	})
	requireCode(t, err, apperr.BadUserInput, "NUL")
	err = b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, "bin", "\xff\xfe")
		return err
	})
	requireCode(t, err, apperr.BadUserInput, "UTF-8")
	require.Empty(t, workspacetest.Snapshot(t, b.d))
}

func TestEdit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, b.a, "main.go", "package main\n\nfunc a() {}\nfunc b() {}\n// a a a\n")

	v, n, err := b.edit(t, b.a, "main.go", "func b() {}", "func b() { return }", false)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, 1, n)
	f, err := b.read(t, b.a, "main.go")
	require.NoError(t, err)
	require.Equal(t, "package main\n\nfunc a() {}\nfunc b() { return }\n// a a a\n", f.Content)

	// Not found, and ambiguous without replace_all: errors that say so, nothing changes.
	_, _, err = b.edit(t, b.a, "main.go", "func c() {}", "x", false)
	requireCode(t, err, apperr.BadUserInput, "old_string: not found in main.go")
	_, _, err = b.edit(t, b.a, "main.go", " a", " z", false)
	requireCode(t, err, apperr.BadUserInput, "old_string: occurs 4 times in main.go")
	require.Contains(t, err.Error(), "replace_all")
	_, _, err = b.edit(t, b.a, "main.go", "", "x", false)
	requireCode(t, err, apperr.BadUserInput, "old_string: is empty")
	_, _, err = b.edit(t, b.a, "main.go", "main", "main", false)
	requireCode(t, err, apperr.BadUserInput, "new_string: is the same as old_string")
	_, _, err = b.edit(t, b.a, "nope.go", "a", "b", false)
	requireCode(t, err, apperr.NotFound, `file "nope.go" not found`)
	_, _, err = b.edit(t, b.a, "main.go", "main", "ma\x00in", false)
	requireCode(t, err, apperr.BadUserInput, "NUL")
	f2, err := b.read(t, b.a, "main.go")
	require.NoError(t, err)
	require.Equal(t, f, f2, "failed edits changed the file")

	// replace_all replaces every occurrence and counts them.
	v, n, err = b.edit(t, b.a, "main.go", " a", " z", true)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, 4, n)
	f, err = b.read(t, b.a, "main.go")
	require.NoError(t, err)
	require.Equal(t, "package main\n\nfunc z() {}\nfunc b() { return }\n// z z z\n", f.Content)
	// replace_all with a single occurrence is fine; deleting text is an edit to "".
	v, n, err = b.edit(t, b.a, "main.go", "package main\n\n", "", true)
	require.NoError(t, err)
	require.Equal(t, 4, v)
	require.Equal(t, 1, n)
	f, err = b.read(t, b.a, "main.go")
	require.NoError(t, err)
	require.Equal(t, "func z() {}\nfunc b() { return }\n// z z z\n", f.Content)
	require.Equal(t, sha256.Sum256([]byte(f.Content)), f.SHA256)
	require.Equal(t, len(f.Content), f.Size)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, b.a, "a/b.txt", "x")
	b.write(t, b.a, "a/c.txt", "y")
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		return b.ws.Delete(ctx, tx, b.a.TenantID, b.a.ProjectID, "./a/b.txt")
	}))
	_, err := b.read(t, b.a, "a/b.txt")
	requireCode(t, err, apperr.NotFound, "not found")
	err = b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		return b.ws.Delete(ctx, tx, b.a.TenantID, b.a.ProjectID, "a/b.txt")
	})
	requireCode(t, err, apperr.NotFound, `file "a/b.txt" not found`)
	// Deleting a directory's name deletes nothing.
	err = b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		return b.ws.Delete(ctx, tx, b.a.TenantID, b.a.ProjectID, "a")
	})
	requireCode(t, err, apperr.NotFound, "not found")
	require.Equal(t, []string{"a/c.txt"}, paths(b.list(t, b.a, "", 0)))
	// A file written again after its deletion continues its history: version 1 (created),
	// 2 (deleted), then 3.
	require.Equal(t, 3, b.write(t, b.a, "a/b.txt", "again"))
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"src/main.go", "src/util/x.go", "srcfoo/y.go", "src", "README.md", "a.txt", "Z.txt", "src-old/z.go"} {
		b.write(t, b.a, p, "content of "+p)
	}
	// Byte order, whatever the database collation.
	require.Equal(t, []string{"README.md", "Z.txt", "a.txt", "src", "src-old/z.go", "src/main.go", "src/util/x.go", "srcfoo/y.go"},
		paths(b.list(t, b.a, "", 0)))
	// A prefix is a directory (and the file of that name), never a string prefix of a name.
	require.Equal(t, []string{"src", "src/main.go", "src/util/x.go"}, paths(b.list(t, b.a, "src", 0)))
	require.Equal(t, []string{"src", "src/main.go", "src/util/x.go"}, paths(b.list(t, b.a, "./src/", 0)))
	require.Equal(t, []string{"src/util/x.go"}, paths(b.list(t, b.a, "src/util", 0)))
	require.Equal(t, []string{"a.txt"}, paths(b.list(t, b.a, "a.txt", 0)))
	require.Empty(t, b.list(t, b.a, "sr", 0).Files)
	require.Empty(t, b.list(t, b.a, "nope", 0).Files)
	// LIKE wildcards in a prefix are literal.
	require.Empty(t, b.list(t, b.a, "s%", 0).Files)
	require.Empty(t, b.list(t, b.a, "sr_", 0).Files)

	l := b.list(t, b.a, "", 3)
	require.Equal(t, []string{"README.md", "Z.txt", "a.txt"}, paths(l))
	require.True(t, l.Truncated)
	l = b.list(t, b.a, "src", 3)
	require.Len(t, l.Files, 3)
	require.False(t, l.Truncated)
	f := l.Files[1]
	require.Equal(t, "src/main.go", f.Path)
	require.Equal(t, len("content of src/main.go"), f.Size)
	require.Equal(t, 1, f.Version)
	require.False(t, f.UpdatedAt.IsZero())
}

func TestSearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, b.a, "a.go", "package a\n\n// TODO: one\nfunc x() {}\n// todo: lower case\n\t// TODO: two\n")
	b.write(t, b.a, "dir/b.go", "TODO at line one\r\nno\r\nTODO again\r\n")
	b.write(t, b.a, "dirx/c.go", "TODO elsewhere")
	b.write(t, b.a, "long.txt", strings.Repeat("x", 1000)+"NEEDLE"+strings.Repeat("y", 1000)+"\nNEEDLE short\n")
	b.write(t, b.a, "pct.txt", "100% sure_thing\n")

	r, err := b.search(t, b.a, "TODO", "", 0)
	require.NoError(t, err)
	require.False(t, r.Truncated)
	require.Equal(t, []workspace.Match{
		{Path: "a.go", Line: 3, Text: "// TODO: one"},
		{Path: "a.go", Line: 6, Text: "\t// TODO: two"},
		{Path: "dir/b.go", Line: 1, Text: "TODO at line one"},
		{Path: "dir/b.go", Line: 3, Text: "TODO again"},
		{Path: "dirx/c.go", Line: 1, Text: "TODO elsewhere"},
	}, r.Matches)

	// Case-sensitive; the prefix is a directory.
	r, err = b.search(t, b.a, "todo", "", 0)
	require.NoError(t, err)
	require.Equal(t, []workspace.Match{{Path: "a.go", Line: 5, Text: "// todo: lower case"}}, r.Matches)
	r, err = b.search(t, b.a, "TODO", "dir/", 0)
	require.NoError(t, err)
	require.Len(t, r.Matches, 2)
	require.Equal(t, "dir/b.go", r.Matches[0].Path)

	// The limit cuts and says so.
	r, err = b.search(t, b.a, "TODO", "", 2)
	require.NoError(t, err)
	require.True(t, r.Truncated)
	require.Len(t, r.Matches, 2)

	// Long lines come back as a window around the match.
	r, err = b.search(t, b.a, "NEEDLE", "", 0)
	require.NoError(t, err)
	require.Len(t, r.Matches, 2)
	m := r.Matches[0]
	require.Equal(t, 1, m.Line)
	require.Contains(t, m.Text, "NEEDLE")
	require.True(t, strings.HasPrefix(m.Text, "…x") && strings.HasSuffix(m.Text, "y…"), "%q", m.Text)
	require.Less(t, len(m.Text), 400)
	require.Equal(t, workspace.Match{Path: "long.txt", Line: 2, Text: "NEEDLE short"}, r.Matches[1])

	// Patterns are literal.
	r, err = b.search(t, b.a, "0% sure_", "", 0)
	require.NoError(t, err)
	require.Len(t, r.Matches, 1)
	r, err = b.search(t, b.a, "%", "dir", 0)
	require.NoError(t, err)
	require.Empty(t, r.Matches)

	for q, msg := range map[string]string{
		"":                        "query: is empty",
		"a\nb":                    "query: contains a line break",
		strings.Repeat("q", 1001): "query: is 1001 bytes long",
		"a\x00":                   "query: is not UTF-8 text",
	} {
		_, err = b.search(t, b.a, q, "", 0)
		requireCode(t, err, apperr.BadUserInput, msg)
	}
}

func TestSearchManyMatchesIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var sb strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&sb, "line %d hit\n", i)
	}
	for i := range 20 {
		b.write(t, b.a, fmt.Sprintf("f%02d.txt", i), sb.String())
	}
	r, err := b.search(t, b.a, "hit", "", 1000)
	require.NoError(t, err)
	require.True(t, r.Truncated)
	require.Len(t, r.Matches, workspace.MaxSearchLimit)
	require.Equal(t, workspace.Match{Path: "f00.txt", Line: 500, Text: "line 499 hit"}, r.Matches[499])
}

func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exact := strings.Repeat("a", workspace.DefaultMaxFileBytes)
	require.Equal(t, 1, b.write(t, b.a, "exact", exact))
	before := workspacetest.Snapshot(t, b.d)

	err := b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, "big", exact+"b")
		return err
	})
	requireCode(t, err, apperr.BadUserInput, "content: is 1048577 bytes; a workspace file holds at most 1048576 bytes (1 MiB)")
	// Replacing a file with too much content fails the same way and keeps the old content.
	err = b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, "exact", exact+"b")
		return err
	})
	requireCode(t, err, apperr.BadUserInput, "at most 1048576 bytes")
	// An edit that would grow the file past the limit.
	_, _, err = b.edit(t, b.a, "exact", "aa", "aaa", false)
	requireCode(t, err, apperr.BadUserInput, "occurs")
	_, _, err = b.edit(t, b.a, "exact", "a", "ab", true)
	requireCode(t, err, apperr.BadUserInput, "content: is 2097152 bytes")
	workspacetest.RequireSameRows(t, before, workspacetest.Snapshot(t, b.d))
}

func TestFileCountLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ws = &workspace.Store{Limits: workspace.Limits{MaxFiles: 3}}
	for i := range 3 {
		require.Equal(t, 1, b.write(t, b.a, fmt.Sprintf("f%d", i), "x"))
	}
	before := workspacetest.Snapshot(t, b.d)
	err := b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, "f3", "x")
		return err
	})
	requireCode(t, err, apperr.BadUserInput, "workspace is full: it holds 3 files")
	workspacetest.RequireSameRows(t, before, workspacetest.Snapshot(t, b.d))
	// Replacing an existing file still works; the limit is per project.
	require.Equal(t, 2, b.write(t, b.a, "f0", "y"))
	require.Equal(t, 1, b.write(t, b.a2, "f3", "x"))
	// Deleting makes room.
	require.NoError(t, b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		return b.ws.Delete(ctx, tx, b.a.TenantID, b.a.ProjectID, "f1")
	}))
	require.Equal(t, 1, b.write(t, b.a, "f3", "x"))
}

// Concurrent creations cannot overshoot the file-count limit: they are serialised on the
// project row.
func TestFileCountLimitConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ws := &workspace.Store{Limits: workspace.Limits{MaxFiles: 5}}
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Go(func() {
			errs[i] = b.d.InTx(b.ctx, b.a.TenantID, func(ctx context.Context, tx *db.Tx) error {
				_, err := ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, fmt.Sprintf("c%02d", i), "x")
				return err
			})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		requireCode(t, err, apperr.BadUserInput, "workspace is full")
	}
	require.Equal(t, 5, ok)
	require.Len(t, b.list(t, b.a, "", 0).Files, 5)
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, b.a, "secret.txt", "tenant A project 1")
	b.write(t, b.a2, "other.txt", "tenant A project 2")

	// Another project of the same tenant sees nothing of the first.
	_, err := b.read(t, b.a2, "secret.txt")
	requireCode(t, err, apperr.NotFound, "not found")
	require.Equal(t, []string{"other.txt"}, paths(b.list(t, b.a2, "", 0)))
	r, err := b.search(t, b.a2, "tenant A", "", 0)
	require.NoError(t, err)
	require.Len(t, r.Matches, 1)
	require.Equal(t, "other.txt", r.Matches[0].Path)

	// Another tenant, naming its own tenant and A's project: nothing.
	wrong := workspacetest.Project{TenantID: b.b.TenantID, ProjectID: b.a.ProjectID}
	// And naming A's tenant from B's transaction: row-level security hides A's rows.
	spoof := workspacetest.Project{TenantID: b.a.TenantID, ProjectID: b.a.ProjectID}
	for _, p := range []workspacetest.Project{b.b, wrong, spoof} {
		err := b.d.InTx(b.ctx, b.b.TenantID, func(ctx context.Context, tx *db.Tx) error {
			_, err := b.ws.Read(ctx, tx, p.TenantID, p.ProjectID, "secret.txt")
			requireCode(t, err, apperr.NotFound, "not found")
			l, err := b.ws.List(ctx, tx, p.TenantID, p.ProjectID, "", 0)
			require.NoError(t, err)
			require.Empty(t, l.Files)
			s, err := b.ws.Search(ctx, tx, p.TenantID, p.ProjectID, "tenant", "", 0)
			require.NoError(t, err)
			require.Empty(t, s.Matches)
			_, _, err = b.ws.Edit(ctx, tx, p.TenantID, p.ProjectID, "secret.txt", "tenant", "pwned", true)
			requireCode(t, err, apperr.NotFound, "not found")
			err = b.ws.Delete(ctx, tx, p.TenantID, p.ProjectID, "secret.txt")
			requireCode(t, err, apperr.NotFound, "not found")
			// Writing into a project the tenant cannot see: the project is not found.
			_, err = b.ws.Write(ctx, tx, p.TenantID, p.ProjectID, "secret.txt", "pwned")
			if p == b.b {
				return err
			}
			requireCode(t, err, apperr.NotFound, "project not found")
			return nil
		})
		require.NoError(t, err)
	}
	f, err := b.read(t, b.a, "secret.txt")
	require.NoError(t, err)
	require.Equal(t, "tenant A project 1", f.Content)
	require.Equal(t, 1, f.Version)
	// B's own file of the same name is separate.
	f, err = b.read(t, b.b, "secret.txt")
	require.NoError(t, err)
	require.Equal(t, "pwned", f.Content)

	// A project that does not exist.
	err = b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.ws.Write(ctx, tx, b.a.TenantID, uuid.Must(uuid.NewV7()), "x", "y")
		return err
	})
	requireCode(t, err, apperr.NotFound, "project not found")
}

// Every operation refuses every bad path with the path's reason, and the table is unchanged
// afterwards, in every tenant and project.
func TestBadPathsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Files at the places the attacks aim for, in the attacked project and around it.
	for _, p := range []workspacetest.Project{b.a, b.a2, b.b} {
		for _, path := range []string{"x", "b", "etc/passwd", "etc/shadow", "windows", "a/b", ".ssh/id_rsa", "a", "dir/file", "root/.bashrc"} {
			b.write(t, p, path, "original "+path)
		}
	}
	before := workspacetest.Snapshot(t, b.d)
	require.Len(t, before, 30)

	files := append(workspacetest.BadPaths(), workspacetest.BadFilePaths()...)
	ops := map[string]func(ctx context.Context, tx *db.Tx, path string) error{
		"write": func(ctx context.Context, tx *db.Tx, path string) error {
			_, err := b.ws.Write(ctx, tx, b.a.TenantID, b.a.ProjectID, path, "pwned")
			return err
		},
		"read": func(ctx context.Context, tx *db.Tx, path string) error {
			_, err := b.ws.Read(ctx, tx, b.a.TenantID, b.a.ProjectID, path)
			return err
		},
		"edit": func(ctx context.Context, tx *db.Tx, path string) error {
			_, _, err := b.ws.Edit(ctx, tx, b.a.TenantID, b.a.ProjectID, path, "original", "pwned", true)
			return err
		},
		"delete": func(ctx context.Context, tx *db.Tx, path string) error {
			return b.ws.Delete(ctx, tx, b.a.TenantID, b.a.ProjectID, path)
		},
	}
	for name, op := range ops {
		for _, bp := range files {
			err := b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error { return op(ctx, tx, bp.Path) })
			require.Error(t, err, "%s %q", name, bp.Path)
			requireBadPath(t, err, "path", bp)
		}
	}
	for _, bp := range workspacetest.BadPaths() {
		err := b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
			_, err := b.ws.List(ctx, tx, b.a.TenantID, b.a.ProjectID, bp.Path, 0)
			return err
		})
		requireBadPath(t, err, "prefix", bp)
		err = b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
			_, err := b.ws.Search(ctx, tx, b.a.TenantID, b.a.ProjectID, "original", bp.Path, 0)
			return err
		})
		requireBadPath(t, err, "prefix", bp)
	}
	workspacetest.RequireSameRows(t, before, workspacetest.Snapshot(t, b.d))
}

func TestNotFoundIsAppErr(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.read(t, b.a, "x")
	var e *apperr.Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "x", e.Fields["path"])
}
