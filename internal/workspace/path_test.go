package workspace_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/workspace"
	"github.com/agentry/agentry/internal/workspace/workspacetest"
)

func TestNormalizePathAccepts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 255)
	cases := map[string]string{
		"a":                   "a",
		"a/./b":               "a/b",
		"./a":                 "a",
		"./a/./b/.":           "a/b",
		"a//b":                "a/b",
		"a///b//c":            "a/b/c",
		"a/.":                 "a",
		".env":                ".env",
		".git/config":         ".git/config",
		"src/.hidden/x.go":    "src/.hidden/x.go",
		"..a":                 "..a",
		"a..b/c":              "a..b/c",
		"%2e%2e/x":            "%2e%2e/x",
		"%2e%2e%2fetc":        "%2e%2e%2fetc",
		"a~":                  "a~",
		"x/~/y":               "x/~/y",
		"file:x":              "file:x",
		"ab:c":                "ab:c",
		"café/naïve.txt":      "café/naïve.txt",
		"日本語/ファイル.md":         "日本語/ファイル.md",
		"emoji 😀.txt":         "emoji 😀.txt",
		" leading-space":      " leading-space",
		"with space/file":     "with space/file",
		long:                  long,
		"x/" + long + "/y":    "x/" + long + "/y",
		"CON":                 "CON",
		"a/b/c/d/e/f/g/h.txt": "a/b/c/d/e/f/g/h.txt",
	}
	for in, want := range cases {
		got, err := workspace.NormalizePath(in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
		again, err := workspace.NormalizePath(got)
		require.NoError(t, err, "normal form %q", got)
		require.Equal(t, got, again, "normalising is idempotent")
	}
	// The longest path allowed: MaxPathBytes bytes in names of at most MaxSegmentBytes.
	longest := strings.Repeat(strings.Repeat("m", 200)+"/", 6)[:workspace.MaxPathBytes-1] + "z"
	require.Len(t, longest, workspace.MaxPathBytes)
	got, err := workspace.NormalizePath(longest)
	require.NoError(t, err)
	require.Equal(t, longest, got)
}

func TestNormalizePrefix(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":          "",
		".":         "",
		"./":        "",
		".//.":      "",
		"src":       "src",
		"src/":      "src",
		"./src//":   "src",
		"a/./b/":    "a/b",
		"docs/a.md": "docs/a.md",
	}
	for in, want := range cases {
		got, err := workspace.NormalizePrefix(in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
	}
}

func TestNormalizePathRejects(t *testing.T) {
	t.Parallel()
	all := append(workspacetest.BadPaths(), workspacetest.BadFilePaths()...)
	require.GreaterOrEqual(t, len(workspacetest.BadPaths()), 60)
	for _, bp := range all {
		_, err := workspace.NormalizePath(bp.Path)
		requireBadPath(t, err, "path", bp)
	}
	for _, bp := range workspacetest.BadPaths() {
		_, err := workspace.NormalizePrefix(bp.Path)
		requireBadPath(t, err, "prefix", bp)
	}
}

// requireBadPath checks that err refuses bp's path for its reason, naming field.
func requireBadPath(t *testing.T, err error, field string, bp workspacetest.BadPath) {
	t.Helper()
	require.Error(t, err, "%q accepted", bp.Path)
	e, ok := apperr.As(err)
	require.True(t, ok, "%q: not an apperr: %v", bp.Path, err)
	require.Equal(t, apperr.BadUserInput, e.Code, "%q: %v", bp.Path, err)
	require.Equal(t, field, e.Fields["field"], "%q: %v", bp.Path, err)
	require.Equal(t, bp.Reason, e.Fields["reason"], "%q: %v", bp.Path, err)
	require.True(t, strings.HasPrefix(e.Message, field+": "), "%q: message %q", bp.Path, e.Message)
	require.LessOrEqual(t, len(e.Message), 400, "%q: message too long", bp.Path)
	for _, r := range e.Message {
		require.False(t, r < 0x20 || r == 0x7f, "%q: message %q has a control character", bp.Path, e.Message)
	}
	require.True(t, strings.ToValidUTF8(e.Message, "") == e.Message, "%q: message is not UTF-8", bp.Path)
}
