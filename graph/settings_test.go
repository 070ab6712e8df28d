package graph_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

const settingsFields = `personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy`

type settingsValues struct {
	Personality       string
	Verbosity         string
	AutoExecute       bool
	ApprovalThreshold int
	MaxTokensPerTask  int
	MaxRetries        int
	TimeoutSeconds    int
	ContextStrategy   string
}

// The defaults docs/api/conversations.md promises.
var settingsDefaults = settingsValues{
	Personality: "BALANCED", Verbosity: "NORMAL", AutoExecute: false, ApprovalThreshold: 50,
	MaxTokensPerTask: 4096, MaxRetries: 3, TimeoutSeconds: 300, ContextStrategy: "PRESERVE",
}

func settingsRead(t *testing.T, env *apptest.Env, token string) settingsValues {
	t.Helper()
	var out struct{ AgentSettings settingsValues }
	env.Do(t, token, `{ agentSettings { `+settingsFields+` } }`, nil).Decode(t, &out)
	return out.AgentSettings
}

func settingsUpdate(t *testing.T, env *apptest.Env, token string, in map[string]any) *apptest.Response {
	t.Helper()
	return env.Do(t, token, `mutation($in: AgentSettingsInput!) { updateAgentSettings(input: $in) { `+settingsFields+` } }`, map[string]any{"in": in})
}

func settingsMustUpdate(t *testing.T, env *apptest.Env, token string, in map[string]any) settingsValues {
	t.Helper()
	var out struct{ UpdateAgentSettings settingsValues }
	settingsUpdate(t, env, token, in).Decode(t, &out)
	return out.UpdateAgentSettings
}

// settingsInt returns the integer field of s named by its GraphQL name.
func settingsInt(t *testing.T, s settingsValues, field string) int {
	t.Helper()
	switch field {
	case "approvalThreshold":
		return s.ApprovalThreshold
	case "maxTokensPerTask":
		return s.MaxTokensPerTask
	case "maxRetries":
		return s.MaxRetries
	case "timeoutSeconds":
		return s.TimeoutSeconds
	}
	t.Fatalf("unknown field %s", field)
	return 0
}

func TestAgentSettings(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "")
	tok := owner.AccessToken

	require.Equal(t, settingsDefaults, settingsRead(t, env, tok))

	bounds := []struct {
		field    string
		min, max int
	}{
		{"approvalThreshold", 0, 100},
		{"maxTokensPerTask", 1024, 131072},
		{"maxRetries", 0, 10},
		{"timeoutSeconds", 30, 3600},
	}
	for _, b := range bounds {
		// Both bounds are accepted and stored.
		for _, v := range []int{b.min, b.max} {
			got := settingsMustUpdate(t, env, tok, map[string]any{b.field: v})
			require.Equal(t, v, settingsInt(t, got, b.field), "%s=%d: answer", b.field, v)
			require.Equal(t, v, settingsInt(t, settingsRead(t, env, tok), b.field), "%s=%d: stored", b.field, v)
		}
		// Leave a value inside the range that differs from both bounds' neighbours.
		mid := (b.min + b.max) / 2
		settingsMustUpdate(t, env, tok, map[string]any{b.field: mid})
		before := settingsRead(t, env, tok)
		require.Equal(t, mid, settingsInt(t, before, b.field))

		// Just outside is BAD_USER_INPUT naming the field, and nothing changes, not even a valid
		// field sent along.
		for _, v := range []int{b.min - 1, b.max + 1} {
			res := settingsUpdate(t, env, tok, map[string]any{b.field: v, "personality": "CREATIVE"})
			require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s=%d: %s", b.field, v, res.Body)
			require.Len(t, res.Errors, 1)
			require.Contains(t, res.Errors[0].Message, b.field, "%s=%d: message does not name the field", b.field, v)
			require.Equal(t, b.field, res.Errors[0].Extensions["field"], "%s=%d: extensions.field", b.field, v)
			require.Equal(t, before, settingsRead(t, env, tok), "%s=%d: a rejected update changed the settings", b.field, v)
		}
	}

	// Enum and boolean fields update.
	got := settingsMustUpdate(t, env, tok, map[string]any{
		"personality": "PRECISE", "verbosity": "DEBUG", "contextStrategy": "SUMMARIZE", "autoExecute": true,
	})
	require.Equal(t, "PRECISE", got.Personality)
	require.Equal(t, "DEBUG", got.Verbosity)
	require.Equal(t, "SUMMARIZE", got.ContextStrategy)
	require.True(t, got.AutoExecute)
	require.Equal(t, got, settingsRead(t, env, tok))
	for _, p := range []string{"PRECISE", "BALANCED", "CREATIVE", "MINIMAL"} {
		require.Equal(t, p, settingsMustUpdate(t, env, tok, map[string]any{"personality": p}).Personality)
	}
	for _, v := range []string{"MINIMAL", "NORMAL", "VERBOSE", "DEBUG"} {
		require.Equal(t, v, settingsMustUpdate(t, env, tok, map[string]any{"verbosity": v}).Verbosity)
	}
	for _, c := range []string{"COMPACT", "PRESERVE", "SUMMARIZE"} {
		require.Equal(t, c, settingsMustUpdate(t, env, tok, map[string]any{"contextStrategy": c}).ContextStrategy)
	}
	// An unknown enum value is refused before any resolver runs.
	res := settingsUpdate(t, env, tok, map[string]any{"personality": "GRUMPY"})
	require.NotEmpty(t, res.Errors, "%s", res.Body)

	// A partial update keeps every other field.
	full := settingsMustUpdate(t, env, tok, map[string]any{
		"personality": "CREATIVE", "verbosity": "VERBOSE", "autoExecute": true, "approvalThreshold": 77,
		"maxTokensPerTask": 8192, "maxRetries": 5, "timeoutSeconds": 600, "contextStrategy": "COMPACT",
	})
	want := settingsValues{Personality: "CREATIVE", Verbosity: "VERBOSE", AutoExecute: true, ApprovalThreshold: 77,
		MaxTokensPerTask: 8192, MaxRetries: 5, TimeoutSeconds: 600, ContextStrategy: "COMPACT"}
	require.Equal(t, want, full)
	got = settingsMustUpdate(t, env, tok, map[string]any{"maxRetries": 9})
	want.MaxRetries = 9
	require.Equal(t, want, got)
	got = settingsMustUpdate(t, env, tok, map[string]any{"autoExecute": false})
	want.AutoExecute = false
	require.Equal(t, want, got)
	got = settingsMustUpdate(t, env, tok, map[string]any{})
	require.Equal(t, want, got, "an empty update changed the settings")
	require.Equal(t, want, settingsRead(t, env, tok))

	// Settings are per user: another member of the same tenant still has the defaults, and their
	// changes do not touch the owner's.
	email := fmt.Sprintf("settings-member-%d@example.com", time.Now().UnixNano())
	res = env.Do(t, tok, `mutation($e: String!) { addMember(input: {email: $e, role: MEMBER}) { pending invitationToken } }`, map[string]any{"e": email})
	require.Empty(t, res.Errors, "%s", res.Body)
	var invited struct {
		AddMember struct{ InvitationToken string }
	}
	res.Decode(t, &invited)
	member := env.SignUp(t, email, "")
	accept := env.Do(t, member.AccessToken, `mutation($t: String!) { acceptInvitation(token: $t) }`, map[string]any{"t": invited.AddMember.InvitationToken})
	require.Empty(t, accept.Errors, "%s", accept.Body)
	in := sessDecodeAuth(t, sessLogIn(t, env, email, member.Password, owner.TenantID), "logIn")
	require.Equal(t, owner.TenantID, in.Viewer.Tenant.ID)
	require.Equal(t, "MEMBER", in.Viewer.Role)
	require.Equal(t, settingsDefaults, settingsRead(t, env, in.AccessToken))
	settingsMustUpdate(t, env, in.AccessToken, map[string]any{"maxRetries": 1, "personality": "MINIMAL"})
	require.Equal(t, want, settingsRead(t, env, tok), "a member's update changed the owner's settings")
	// ...and the same member in their own tenant has separate settings too.
	require.Equal(t, settingsDefaults, settingsRead(t, env, member.AccessToken))
}
