package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/tool"
	"github.com/agentry/agentry/internal/workspace"
	"github.com/agentry/agentry/internal/workspace/workspacetest"
)

// bundle is what a tool test works with: a fresh database, the built-in registry, two projects
// of tenant A and one of tenant B.
type bundle struct {
	ctx   context.Context
	d     *db.DB
	reg   *tool.Registry
	a, a2 workspacetest.Project
	b     workspacetest.Project
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d, _ := dbtest.Open(t)
	pa := workspacetest.NewTenant(t, d, 2)
	pb := workspacetest.NewTenant(t, d, 1)
	return &bundle{ctx: context.Background(), d: d, reg: tool.NewRegistry(), a: pa[0], a2: pa[1], b: pb[0]}
}

// call runs one tool call through the registry (validation, then the tool) in a transaction of
// p's tenant that commits whatever the call answers, so that a refused call cannot hide a write
// behind a rollback.
func (b *bundle) call(t *testing.T, p workspacetest.Project, name string, args any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	var res tool.Result
	var callErr error
	require.NoError(t, b.d.InTx(b.ctx, p.TenantID, func(ctx context.Context, tx *db.Tx) error {
		env := tool.Env{Tx: tx, TenantID: p.TenantID, ProjectID: p.ProjectID, UserID: uuid.Must(uuid.NewV7()), RunID: uuid.Must(uuid.NewV7())}
		res, callErr = b.reg.Run(ctx, env, name, raw)
		return nil
	}))
	return res.Output, callErr
}

func (b *bundle) mustCall(t *testing.T, p workspacetest.Project, name string, args any) string {
	t.Helper()
	out, err := b.call(t, p, name, args)
	require.NoError(t, err, "%s %v", name, args)
	return out
}

type obj = map[string]any

func TestToolsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, "the workspace is empty", b.mustCall(t, b.a, "list_files", obj{}))

	require.Equal(t, "created notes/plan.md (12 B, version 1)",
		b.mustCall(t, b.a, "write_file", obj{"path": "./notes//plan.md", "content": "step 1\nstep2"}))
	require.Equal(t, "replaced notes/plan.md (14 B, version 2)",
		b.mustCall(t, b.a, "write_file", obj{"path": "notes/plan.md", "content": "step 1\nstep 2\n"}))
	b.mustCall(t, b.a, "write_file", obj{"path": "src/main.go", "content": "package main\n\n// TODO: write main\nfunc main() {}\n"})
	b.mustCall(t, b.a, "write_file", obj{"path": "empty.txt", "content": ""})

	require.Equal(t, "step 1\nstep 2\n", b.mustCall(t, b.a, "read_file", obj{"path": "notes/plan.md"}))
	require.Equal(t, "(empty file)", b.mustCall(t, b.a, "read_file", obj{"path": "empty.txt"}))

	require.Equal(t, "empty.txt (0 B, v1)\nnotes/plan.md (14 B, v2)\nsrc/main.go (49 B, v1)", b.mustCall(t, b.a, "list_files", obj{}))
	require.Equal(t, "src/main.go (49 B, v1)", b.mustCall(t, b.a, "list_files", obj{"prefix": "src/"}))
	require.Equal(t, `no files under "docs"`, b.mustCall(t, b.a, "list_files", obj{"prefix": "docs"}))
	require.Equal(t, "empty.txt (0 B, v1)\n[listing cut after 1 file; more exist: give a narrower prefix]",
		b.mustCall(t, b.a, "list_files", obj{"limit": 1}))

	require.Equal(t, "src/main.go:3: // TODO: write main", b.mustCall(t, b.a, "search_files", obj{"query": "TODO"}))
	require.Equal(t, "notes/plan.md:1: step 1\nnotes/plan.md:2: step 2", b.mustCall(t, b.a, "search_files", obj{"query": "step", "path_prefix": "notes"}))
	require.Equal(t, `no lines contain "nothing"`, b.mustCall(t, b.a, "search_files", obj{"query": "nothing"}))
	require.Equal(t, `no lines under "notes" contain "TODO"`, b.mustCall(t, b.a, "search_files", obj{"query": "TODO", "path_prefix": "notes"}))
	require.Equal(t, "notes/plan.md:1: step 1\n[results cut after 1 line; more exist: narrow path_prefix or the query]",
		b.mustCall(t, b.a, "search_files", obj{"query": "step", "limit": 1}))

	require.Equal(t, "edited src/main.go: replaced 1 occurrence (version 2)",
		b.mustCall(t, b.a, "edit_file", obj{"path": "src/main.go", "old_string": "// TODO: write main\n", "new_string": ""}))
	_, err := b.call(t, b.a, "edit_file", obj{"path": "notes/plan.md", "old_string": "step", "new_string": "Step"})
	requireCode(t, err, apperr.BadUserInput, "old_string: occurs 2 times in notes/plan.md")
	require.Equal(t, "edited notes/plan.md: replaced 2 occurrences (version 3)",
		b.mustCall(t, b.a, "edit_file", obj{"path": "notes/plan.md", "old_string": "step", "new_string": "Step", "replace_all": true}))
	_, err = b.call(t, b.a, "edit_file", obj{"path": "notes/plan.md", "old_string": "missing", "new_string": "x"})
	requireCode(t, err, apperr.BadUserInput, "old_string: not found in notes/plan.md")
	require.Equal(t, "Step 1\nStep 2\n", b.mustCall(t, b.a, "read_file", obj{"path": "notes/plan.md"}))

	require.Equal(t, "deleted notes/plan.md", b.mustCall(t, b.a, "delete_file", obj{"path": "notes/plan.md"}))
	_, err = b.call(t, b.a, "read_file", obj{"path": "notes/plan.md"})
	requireCode(t, err, apperr.NotFound, `file "notes/plan.md" not found`)
	_, err = b.call(t, b.a, "delete_file", obj{"path": "notes/plan.md"})
	requireCode(t, err, apperr.NotFound, `file "notes/plan.md" not found`)

	// Schema errors come back before the tool runs.
	_, err = b.call(t, b.a, "write_file", obj{"path": "x"})
	requireCode(t, err, apperr.BadUserInput, "invalid arguments for write_file: arguments: missing property 'content'")
}

func TestReadFileLongOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var sb strings.Builder
	for i := 1; sb.Len() < 900<<10; i++ {
		fmt.Fprintf(&sb, "line %06d %s\n", i, strings.Repeat("x", 80))
	}
	content := sb.String()
	lines := strings.SplitAfter(content, "\n")
	lines = lines[:len(lines)-1]
	b.mustCall(t, b.a, "write_file", obj{"path": "big.txt", "content": content})

	out := b.mustCall(t, b.a, "read_file", obj{"path": "big.txt"})
	require.Less(t, len(out), tool.MaxReadOutputBytes+200)
	body, note, ok := cutLast(out)
	require.True(t, ok)
	n := strings.Count(body, "\n") + 1
	require.Equal(t, strings.Join(lines[:n], ""), body+"\n", "whole lines from the start")
	require.Equal(t, fmt.Sprintf("[showing lines 1-%d of %d (output limit 64.0 KiB); call read_file with offset=%d to continue]", n, len(lines), n+1), note)

	// Continuing from the offset the note gives, then to the end.
	var got strings.Builder
	got.WriteString(body + "\n")
	offset := n + 1
	for range 100 {
		out = b.mustCall(t, b.a, "read_file", obj{"path": "big.txt", "offset": offset})
		body, note, ok = cutLast(out)
		require.True(t, ok, "every part after the first ends with a note")
		got.WriteString(body + "\n")
		if strings.Contains(note, "the end of the file") {
			break
		}
		_, err := fmt.Sscanf(note[strings.Index(note, "offset="):], "offset=%d", &offset)
		require.NoError(t, err)
	}
	require.Equal(t, content, got.String())

	// A range of lines.
	out = b.mustCall(t, b.a, "read_file", obj{"path": "big.txt", "offset": 3, "limit": 2})
	require.Equal(t, lines[2]+lines[3]+fmt.Sprintf("[showing lines 3-4 of %d]", len(lines)), out)
	_, err := b.call(t, b.a, "read_file", obj{"path": "big.txt", "offset": len(lines) + 1})
	requireCode(t, err, apperr.BadUserInput, fmt.Sprintf("offset: is %d but big.txt has %d lines", len(lines)+1, len(lines)))

	// One huge line is cut at a character boundary.
	b.mustCall(t, b.a, "write_file", obj{"path": "one-line.json", "content": strings.Repeat("é", 300<<10)})
	out = b.mustCall(t, b.a, "read_file", obj{"path": "one-line.json"})
	body, note, ok = cutLast(out)
	require.True(t, ok)
	require.Equal(t, strings.Repeat("é", tool.MaxReadOutputBytes/2), body)
	require.Equal(t, "[line 1 is longer than 64.0 KiB and was cut; one-line.json has 1 line]", note)
}

// cutLast splits out into what comes before its last line and that line.
func cutLast(out string) (string, string, bool) {
	i := strings.LastIndex(out, "\n")
	if i < 0 {
		return "", "", false
	}
	return out[:i], out[i+1:], true
}

func TestToolsRefuseBadPaths(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []workspacetest.Project{b.a, b.a2, b.b} {
		for _, path := range []string{"x", "b", "etc/passwd", "windows", "a/b", ".ssh/id_rsa", "a", "root/.bashrc", "%2e%2e/x"} {
			b.mustCall(t, p, "write_file", obj{"path": path, "content": "original " + path})
		}
	}
	before := workspacetest.Snapshot(t, b.d)
	require.Len(t, before, 27)

	files := append(workspacetest.BadPaths(), workspacetest.BadFilePaths()...)
	for _, bp := range files {
		for name, args := range map[string]obj{
			"write_file":  {"path": bp.Path, "content": "pwned"},
			"read_file":   {"path": bp.Path},
			"edit_file":   {"path": bp.Path, "old_string": "original", "new_string": "pwned", "replace_all": true},
			"delete_file": {"path": bp.Path},
		} {
			_, err := b.call(t, b.a, name, args)
			requireBadPath(t, err, name, "path", bp)
		}
	}
	for _, bp := range workspacetest.BadPaths() {
		_, err := b.call(t, b.a, "list_files", obj{"prefix": bp.Path})
		requireBadPath(t, err, "list_files", "prefix", bp)
		_, err = b.call(t, b.a, "search_files", obj{"query": "original", "path_prefix": bp.Path})
		requireBadPath(t, err, "search_files", "prefix", bp)
	}
	workspacetest.RequireSameRows(t, before, workspacetest.Snapshot(t, b.d))
}

// requireBadPath checks that a tool refused bp's path for its reason. Paths travel as JSON,
// where invalid UTF-8 turns into U+FFFD; the reason stays the same.
func requireBadPath(t *testing.T, err error, tool, field string, bp workspacetest.BadPath) {
	t.Helper()
	require.Error(t, err, "%s accepted %q", tool, bp.Path)
	e, ok := apperr.As(err)
	require.True(t, ok, "%s %q: %v", tool, bp.Path, err)
	require.Equal(t, apperr.BadUserInput, e.Code, "%s %q: %v", tool, bp.Path, err)
	require.Equal(t, field, e.Fields["field"], "%s %q: %v", tool, bp.Path, err)
	require.Equal(t, bp.Reason, e.Fields["reason"], "%s %q: %v", tool, bp.Path, err)
	require.True(t, strings.HasPrefix(e.Message, field+": "), "%s %q: %s", tool, bp.Path, e.Message)
}

func TestToolsIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustCall(t, b.a, "write_file", obj{"path": "secret.txt", "content": "tenant A"})
	for _, p := range []workspacetest.Project{b.a2, b.b} {
		_, err := b.call(t, p, "read_file", obj{"path": "secret.txt"})
		requireCode(t, err, apperr.NotFound, "not found")
		require.Equal(t, "the workspace is empty", b.mustCall(t, p, "list_files", obj{}))
		require.Equal(t, `no lines contain "tenant"`, b.mustCall(t, p, "search_files", obj{"query": "tenant"}))
		_, err = b.call(t, p, "delete_file", obj{"path": "secret.txt"})
		requireCode(t, err, apperr.NotFound, "not found")
	}
	require.Equal(t, "tenant A", b.mustCall(t, b.a, "read_file", obj{"path": "secret.txt"}))
}

func TestToolLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := workspacetest.Snapshot(t, b.d)
	_, err := b.call(t, b.a, "write_file", obj{"path": "big", "content": strings.Repeat("a", workspace.DefaultMaxFileBytes+1)})
	requireCode(t, err, apperr.BadUserInput, "at most 1048576 bytes (1 MiB)")
	_, err = b.call(t, b.a, "write_file", obj{"path": "nul", "content": "a\x00b"})
	requireCode(t, err, apperr.BadUserInput, "NUL")
	workspacetest.RequireSameRows(t, before, workspacetest.Snapshot(t, b.d))

	// A registry over a store with a small file-count limit.
	small := tool.NewEmptyRegistry()
	for _, tl := range tool.WorkspaceTools(&workspace.Store{Limits: workspace.Limits{MaxFiles: 2}}) {
		require.NoError(t, small.Register(tl))
	}
	b.reg = small
	b.mustCall(t, b.a, "write_file", obj{"path": "1", "content": ""})
	b.mustCall(t, b.a, "write_file", obj{"path": "2", "content": ""})
	_, err = b.call(t, b.a, "write_file", obj{"path": "3", "content": ""})
	requireCode(t, err, apperr.BadUserInput, "workspace is full")
}

func TestRunWithoutTransaction(t *testing.T) {
	t.Parallel()
	for _, tl := range tool.Builtins() {
		_, err := tl.Run(context.Background(), tool.Env{}, json.RawMessage(`{"path":"a","content":"","old_string":"a","new_string":"b","query":"q"}`))
		require.Error(t, err, tl.Spec().Name)
	}
	// Run on its own (without the registry) still refuses arguments it cannot read.
	var rf tool.ReadFile
	_, err := rf.Run(context.Background(), tool.Env{}, json.RawMessage(`{"path": 3}`))
	var ae *tool.ArgumentError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, apperr.BadUserInput, apperr.CodeOf(err))
}

func requireCode(t *testing.T, err error, code apperr.Code, contains string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), contains)
}
