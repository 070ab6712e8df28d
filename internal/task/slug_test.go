package task

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTaskSlugify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ title, want string }{
		{"Fix login", "fix-login"},
		{"  Fix   the LOGIN page!!  ", "fix-the-login-page"},
		{"Add OAuth2 (GitHub) sign-in", "add-oauth2-github-sign-in"},
		{"--already--dashed--", "already-dashed"},
		{"snake_case_title", "snake-case-title"},
		{"Café crème à la carte", "cafe-creme-a-la-carte"},
		{"Ünïcödé", "unicode"},
		{"ﬁle ligature", "file-ligature"},
		{"日本語のタスク", "task"},
		{"!!!", "task"},
		{"v2.0 release", "v2-0-release"},
		{"42", "42"},
	} {
		require.Equal(t, c.want, Slugify(c.title), "title %q", c.title)
	}

	long := Slugify(strings.Repeat("word ", 40))
	require.LessOrEqual(t, len(long), maxSlugBase)
	require.False(t, strings.HasSuffix(long, "-"), long)
	require.True(t, strings.HasPrefix(long, "word-word"), long)
	unbroken := Slugify(strings.Repeat("x", 200))
	require.Equal(t, strings.Repeat("x", maxSlugBase), unbroken)
}

func TestTaskUniqueSlug(t *testing.T) {
	t.Parallel()
	require.Equal(t, "fix", uniqueSlug("fix", nil))
	require.Equal(t, "fix", uniqueSlug("fix", []string{"fix-2", "fix-login"}))
	require.Equal(t, "fix-2", uniqueSlug("fix", []string{"fix"}))
	require.Equal(t, "fix-3", uniqueSlug("fix", []string{"fix", "fix-2", "fix-login"}))
	require.Equal(t, "fix-2", uniqueSlug("fix", []string{"fix", "fix-3"}), "the first free number")
}

func TestTaskLimitsFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		complexity string
		turns      int
		duration   time.Duration
	}{
		{ComplexitySimple, 50, 15 * time.Minute},
		{ComplexityStandard, 100, 30 * time.Minute},
		{ComplexityComplex, 200, 60 * time.Minute},
		{"", 100, 30 * time.Minute},
	} {
		l := LimitsFor(c.complexity)
		require.Equal(t, c.turns, l.MaxTurns, c.complexity)
		require.Equal(t, c.duration, l.MaxDuration, c.complexity)
		require.Equal(t, 20, l.ConfirmAfter, c.complexity)
	}
}
