package workspace_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/workspace"
)

// applyDiff applies a unified diff to old, checking every context and removed line, the way
// patch does. It is the test's independent reading of the format.
func applyDiff(t *testing.T, old, diff string) string {
	t.Helper()
	if diff == "" {
		return old
	}
	src := splitKeep(old)
	lines := strings.SplitAfter(diff, "\n")
	require.True(t, strings.HasPrefix(lines[0], "--- "), "header: %q", lines[0])
	require.True(t, strings.HasPrefix(lines[1], "+++ "), "header: %q", lines[1])
	var out []string
	pos := 0
	i := 2
	for i < len(lines) && lines[i] != "" {
		h := lines[i]
		require.True(t, strings.HasPrefix(h, "@@ -"), "hunk header: %q", h)
		var aStart, aLen, bStart, bLen int
		parseRange := func(r string) (int, int) {
			s, l, ok := strings.Cut(r, ",")
			start, err := strconv.Atoi(s)
			require.NoError(t, err)
			n := 1
			if ok {
				n, err = strconv.Atoi(l)
				require.NoError(t, err)
			}
			return start, n
		}
		f := strings.Fields(h)
		aStart, aLen = parseRange(strings.TrimPrefix(f[1], "-"))
		bStart, bLen = parseRange(strings.TrimPrefix(f[2], "+"))
		_ = bStart
		from := aStart - 1
		if aLen == 0 {
			from = aStart
		}
		require.GreaterOrEqual(t, from, pos, "hunks overlap")
		out = append(out, src[pos:from]...)
		pos = from
		i++
		gotA, gotB := 0, 0
		for i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			body := l[1:]
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\\ No newline") {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch l[0] {
			case ' ':
				require.Equal(t, src[pos], body, "context line %d", pos+1)
				out = append(out, body)
				pos++
				gotA++
				gotB++
			case '-':
				require.Equal(t, src[pos], body, "removed line %d", pos+1)
				pos++
				gotA++
			case '+':
				out = append(out, body)
				gotB++
			default:
				t.Fatalf("bad diff line %q", l)
			}
			i++
		}
		require.Equal(t, aLen, gotA, "old length of %q", h)
		require.Equal(t, bLen, gotB, "new length of %q", h)
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, "")
}

func splitKeep(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

func TestUnifiedDiffRoundTrip(t *testing.T) {
	t.Parallel()
	cases := [][2]string{
		{"", "a\n"},
		{"a\n", ""},
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"a\nb\nc", "a\nb\nc\n"},
		{"a\nb\nc\n", "a\nb\nc"},
		{"x", "y"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n"},
		{"same\n", "same\n"},
	}
	for _, c := range cases {
		d := workspace.UnifiedDiff("a/f", "b/f", c[0], c[1])
		require.Equal(t, c[1], applyDiff(t, c[0], d), "diff:\n%s", d)
	}
	require.Equal(t, "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n", workspace.UnifiedDiff("a/f", "b/f", "a\nb\nc\n", "a\nB\nc\n"))
	require.Equal(t, "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+a\n", workspace.UnifiedDiff("a/f", "b/f", "", "a\n"))

	r := rand.New(rand.NewPCG(7, 11))
	gen := func() string {
		n := r.IntN(60)
		var sb strings.Builder
		for range n {
			fmt.Fprintf(&sb, "line %d\n", r.IntN(12))
		}
		s := sb.String()
		if s != "" && r.IntN(3) == 0 {
			s = strings.TrimSuffix(s, "\n")
		}
		return s
	}
	for range 500 {
		a, b := gen(), gen()
		d := workspace.UnifiedDiff("a", "b", a, b)
		require.Equal(t, b, applyDiff(t, a, d), "old %q new %q diff:\n%s", a, b, d)
	}
}

// BenchmarkUnifiedDiffLargest diffs two versions of the largest file (1 MiB, every line
// changed: the worst case for Myers' algorithm) and reports the CPU time and bytes allocated of
// one diff: bounded by maxEdits and maxDiffWork however the files differ.
func BenchmarkUnifiedDiffLargest(b *testing.B) {
	var x, y strings.Builder
	for i := 0; x.Len() < workspace.DefaultMaxFileBytes-64; i++ {
		fmt.Fprintf(&x, "line %d of the old version, with some words\n", i)
		fmt.Fprintf(&y, "line %d of the new version, with other words\n", i)
	}
	old, new := x.String()[:workspace.DefaultMaxFileBytes-64], y.String()[:workspace.DefaultMaxFileBytes-64]
	b.ReportAllocs()
	for b.Loop() {
		if workspace.UnifiedDiff("a", "b", old, new) == "" {
			b.Fatal("no diff")
		}
	}
}
