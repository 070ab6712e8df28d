package subagent

import (
	"encoding/base64"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/tool"
)

func TestSpawnCheckDefaultsAndRanges(t *testing.T) {
	in := Spawn{Role: RoleCoder, Goal: "  fix it  "}
	require.NoError(t, in.check())
	require.Equal(t, Spawn{Role: RoleCoder, Goal: "fix it", Priority: 5, MaxTurns: 20, MaxTokens: 100_000, TimeoutMinutes: 60}, in)
	for _, bad := range []Spawn{
		{Role: "BOSS", Goal: "x"}, {Role: RoleGeneral, Goal: " "}, {Role: RoleGeneral, Goal: "a\x00b"},
		{Role: RoleGeneral, Goal: "x", Priority: 11}, {Role: RoleGeneral, Goal: "x", Priority: -1},
		{Role: RoleGeneral, Goal: "x", MaxTurns: 101}, {Role: RoleGeneral, Goal: "x", MaxTokens: 999},
		{Role: RoleGeneral, Goal: "x", MaxTokens: 1_000_001}, {Role: RoleGeneral, Goal: "x", TimeoutMinutes: 241},
	} {
		err := bad.check()
		require.Error(t, err, "%+v", bad)
		require.Equal(t, apperr.BadUserInput, apperr.CodeOf(err), "%+v", bad)
	}
}

func TestRoleTools(t *testing.T) {
	reg := tool.NewRegistry()
	for _, tl := range tool.MemoryTools() {
		require.NoError(t, reg.Register(tl))
	}
	s := &Service{}
	for _, tl := range s.Tools() {
		require.NoError(t, reg.Register(tl))
	}
	all := toolsFor(reg, RoleGeneral, nil)
	require.NotContains(t, all, "remember", "no memory-writing tool")
	require.Contains(t, all, "recall")
	require.Contains(t, all, "write_file")
	require.Contains(t, all, SpawnToolName)
	require.Empty(t, toolsFor(reg, RoleCreative, nil))
	ro := toolsFor(reg, RoleResearcher, nil)
	for _, name := range ro {
		tl, err := reg.Get(name)
		require.NoError(t, err)
		require.True(t, tl.ReadOnly() || name == SpawnToolName, "%s is not read-only", name)
	}
	// Never a tool the parent lacks.
	under := toolsFor(reg, RoleCoder, ro)
	require.True(t, slices.Equal(under, ro), "a coder under a researcher: %v", under)
}

func TestParseID(t *testing.T) {
	id := uuid.Must(uuid.NewV7())
	for _, s := range []string{id.String(), base64.RawURLEncoding.EncodeToString([]byte("Subagent:" + id.String())), " " + id.String() + " "} {
		got, ok := parseID(s)
		require.True(t, ok, s)
		require.Equal(t, id, got)
	}
	for _, s := range []string{"", "nope", base64.RawURLEncoding.EncodeToString([]byte("Task:" + id.String()))} {
		_, ok := parseID(s)
		require.False(t, ok, s)
	}
}
