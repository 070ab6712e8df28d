package graph_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

const (
	memSetRole = `mutation($u: ID!, $r: Role!) { setMemberRole(userId: $u, role: $r) { role user { id email } tenant { id } } }`
	memRemove  = `mutation($u: ID!) { removeMember(userId: $u) }`
	memList    = `query($n: Int, $a: String) { members(first: $n, after: $a) {
		edges { cursor node { role pending joinedAt user { id email } tenant { id name } } } pageInfo { hasNextPage endCursor } } }`
)

type memMember struct {
	Role    string
	Pending bool
	User    struct{ ID, Email string }
	Tenant  struct{ ID, Name string }
}

// memJoin invites the account of s to the tenant of owner with role, accepts the invitation
// as s (through the link emailed to s), and returns a session of s in that tenant.
func memJoin(t *testing.T, env *apptest.Env, owner string, s apptest.Session, tenantID, role string) sessAuthPayload {
	t.Helper()
	n := len(env.Mail.Sent(s.Email))
	res := env.Do(t, owner, sessAddMemberMutation, map[string]any{"in": map[string]any{"email": s.Email, "role": role}})
	require.Empty(t, res.Errors, "%s", res.Body)
	invitations := 0
	for _, m := range env.Mail.Sent(s.Email)[:n] {
		if strings.Contains(m.Subject, "invited") {
			invitations++
		}
	}
	token := env.LinkToken(t, s.Email, "invited", invitations+1)
	res = env.Do(t, s.AccessToken, `mutation($t: String!) { acceptInvitation(token: $t) }`, map[string]any{"t": token})
	require.Empty(t, res.Errors, "acceptInvitation: %s", res.Body)
	return sessDecodeAuth(t, sessLogIn(t, env, s.Email, s.Password, tenantID), "logIn")
}

func memMembers(t *testing.T, env *apptest.Env, token string) map[string]memMember {
	t.Helper()
	var out struct {
		Members struct{ Edges []struct{ Node memMember } }
	}
	env.Do(t, token, memList, map[string]any{"n": 100}).Decode(t, &out)
	m := map[string]memMember{}
	for _, e := range out.Members.Edges {
		m[e.Node.User.ID] = e.Node
	}
	return m
}

// TestMembersRolesAndRemoval: members lists the tenant's people; setMemberRole and
// removeMember are for OWNER and ADMIN, an ADMIN cannot touch an OWNER, the last OWNER is never
// removed or demoted (not even by two owners demoting each other at once), and a removed
// member's sessions and API keys stop working.
func TestMembersRolesAndRemoval(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	var (
		mu      sync.Mutex
		changed []uuid.UUID // the users OnMemberChange was told of
	)
	wired := env.App.Tenancy.OnMemberChange
	env.App.Tenancy.OnMemberChange = func(tenantID, userID uuid.UUID) {
		wired(tenantID, userID)
		mu.Lock()
		defer mu.Unlock()
		changed = append(changed, userID)
	}
	changes := func() []uuid.UUID {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(changed)
	}
	owner := env.SignUp(t, "", "Acme")
	adminAcct, memberAcct := env.SignUp(t, "", "Admin's own"), env.SignUp(t, "", "Member's own")
	admin := memJoin(t, env, owner.AccessToken, adminAcct, owner.TenantID, "ADMIN")
	// The member made an API key while an admin (only admins make keys).
	member := memJoin(t, env, owner.AccessToken, memberAcct, owner.TenantID, "ADMIN")
	require.Equal(t, owner.TenantID, admin.Viewer.Tenant.ID)
	_, memberKey := sessCreateKey(t, env, member.AccessToken, "member's key", "MEMBER")
	res := env.Do(t, owner.AccessToken, memSetRole, map[string]any{"u": memberAcct.UserID, "r": "MEMBER"})
	require.Empty(t, res.Errors, "%s", res.Body)
	member = sessDecodeAuth(t, sessLogIn(t, env, memberAcct.Email, memberAcct.Password, owner.TenantID), "logIn")
	require.Equal(t, "MEMBER", member.Viewer.Role)

	// members: everyone, with their roles, paged.
	all := memMembers(t, env, member.AccessToken)
	require.Len(t, all, 3)
	require.Equal(t, "OWNER", all[owner.UserID].Role)
	require.Equal(t, "ADMIN", all[adminAcct.UserID].Role)
	require.Equal(t, "MEMBER", all[memberAcct.UserID].Role)
	require.Equal(t, "Acme", all[owner.UserID].Tenant.Name)
	var page struct {
		Members struct {
			Edges    []struct{ Node memMember }
			PageInfo struct {
				HasNextPage bool
				EndCursor   string
			}
		}
	}
	env.Do(t, owner.AccessToken, memList, map[string]any{"n": 2}).Decode(t, &page)
	require.Len(t, page.Members.Edges, 2)
	require.True(t, page.Members.PageInfo.HasNextPage)
	firstPage := []string{page.Members.Edges[0].Node.User.ID, page.Members.Edges[1].Node.User.ID}
	var rest struct {
		Members struct{ Edges []struct{ Node memMember } }
	}
	env.Do(t, owner.AccessToken, memList, map[string]any{"n": 2, "a": page.Members.PageInfo.EndCursor}).Decode(t, &rest)
	require.Len(t, rest.Members.Edges, 1)
	require.NotContains(t, firstPage, rest.Members.Edges[0].Node.User.ID)

	code := func(token, q string, vars map[string]any) string {
		t.Helper()
		return env.Do(t, token, q, vars).Code()
	}
	// A MEMBER changes no one.
	require.Equal(t, "FORBIDDEN", code(member.AccessToken, memSetRole, map[string]any{"u": adminAcct.UserID, "r": "VIEWER"}))
	require.Equal(t, "FORBIDDEN", code(member.AccessToken, memRemove, map[string]any{"u": adminAcct.UserID}))
	// An ADMIN cannot touch an OWNER, nor make one.
	require.Equal(t, "FORBIDDEN", code(admin.AccessToken, memSetRole, map[string]any{"u": owner.UserID, "r": "MEMBER"}))
	require.Equal(t, "FORBIDDEN", code(admin.AccessToken, memRemove, map[string]any{"u": owner.UserID}))
	require.Equal(t, "FORBIDDEN", code(admin.AccessToken, memSetRole, map[string]any{"u": memberAcct.UserID, "r": "OWNER"}))
	// ...but changes a MEMBER.
	var set struct{ SetMemberRole memMember }
	env.Do(t, admin.AccessToken, memSetRole, map[string]any{"u": memberAcct.UserID, "r": "VIEWER"}).Decode(t, &set)
	require.Equal(t, "VIEWER", set.SetMemberRole.Role)
	require.Equal(t, memberAcct.Email, set.SetMemberRole.User.Email)
	memberUUID := approvalUUID(t, "User", memberAcct.UserID)
	require.Equal(t, []uuid.UUID{memberUUID, memberUUID}, changes(), "told of each change, after it")
	// Someone outside the tenant, or no one, is NOT_FOUND.
	outsider := env.SignUp(t, "", "Elsewhere")
	require.Equal(t, "NOT_FOUND", code(owner.AccessToken, memRemove, map[string]any{"u": outsider.UserID}))
	require.Equal(t, "NOT_FOUND", code(owner.AccessToken, memSetRole, map[string]any{"u": isoGlobalID("User", uuid.New()), "r": "ADMIN"}))
	require.Equal(t, "NOT_FOUND", code(outsider.AccessToken, memRemove, map[string]any{"u": memberAcct.UserID}), "another tenant's member")

	// The last OWNER stays.
	res = env.Do(t, owner.AccessToken, memSetRole, map[string]any{"u": owner.UserID, "r": "ADMIN"})
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
	require.Contains(t, res.Errors[0].Message, "last OWNER")
	require.Equal(t, "CONFLICT", code(owner.AccessToken, memRemove, map[string]any{"u": owner.UserID}))
	// Two owners demoting each other at once: one of them stays OWNER.
	env.Do(t, owner.AccessToken, memSetRole, map[string]any{"u": adminAcct.UserID, "r": "OWNER"}).Decode(t, &set)
	second := sessDecodeAuth(t, sessLogIn(t, env, adminAcct.Email, adminAcct.Password, owner.TenantID), "logIn")
	require.Equal(t, "OWNER", second.Viewer.Role)
	var wg sync.WaitGroup
	codes := make([]string, 2)
	for i, c := range []struct{ token, target string }{{owner.AccessToken, adminAcct.UserID}, {second.AccessToken, owner.UserID}} {
		wg.Go(func() {
			res, err := sessPost(t.Context(), env, c.token, memSetRole, map[string]any{"u": c.target, "r": "ADMIN"})
			if err == nil {
				codes[i] = res.Code()
			}
		})
	}
	wg.Wait()
	// The second, under the tenant's lock, is an ADMIN by then (FORBIDDEN to touch an OWNER), or,
	// had it read the roles before, would find the last OWNER (CONFLICT).
	require.Contains(t, codes, "", "one demotion goes through")
	require.True(t, slices.Contains(codes, "FORBIDDEN") || slices.Contains(codes, "CONFLICT"), "exactly one demotion goes through: %v", codes)
	owners := 0
	for _, m := range memMembers(t, env, member.AccessToken) {
		if m.Role == "OWNER" {
			owners++
		}
	}
	require.Equal(t, 1, owners)

	// A removed member's refresh token and API key stop working, and the list forgets them.
	var removed struct{ RemoveMember bool }
	env.Do(t, admin.AccessToken, memRemove, map[string]any{"u": memberAcct.UserID}).Decode(t, &removed)
	require.True(t, removed.RemoveMember)
	require.Equal(t, memberUUID, changes()[len(changes())-1])
	require.Equal(t, "UNAUTHENTICATED", sessRefresh(t, env, member.RefreshToken).Code())
	res = env.Do(t, memberKey, sessViewerRole, nil)
	require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
	require.NotContains(t, memMembers(t, env, owner.AccessToken), memberAcct.UserID)
	// Added again, they start afresh: the old key stays revoked.
	memJoin(t, env, owner.AccessToken, memberAcct, owner.TenantID, "MEMBER")
	require.Equal(t, http.StatusUnauthorized, env.Do(t, memberKey, sessViewerRole, nil).Status)
}

// TestViewerMembershipsAndSwitchTenant: viewer.memberships lists the person's tenants for a
// switcher, and switchTenant opens a session in another of them, spending the current refresh
// token; a tenant they have not joined is NOT_FOUND.
func TestViewerMembershipsAndSwitchTenant(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	ada := env.SignUp(t, "", "Ada's")
	bob := env.SignUp(t, "", "Bob's")
	memJoin(t, env, bob.AccessToken, ada, bob.TenantID, "MEMBER")

	var v struct {
		Viewer struct {
			Memberships []struct {
				Role   string
				Tenant struct{ ID, Name string }
				User   struct{ ID string }
			}
		}
	}
	env.Do(t, ada.AccessToken, `{ viewer { memberships { role tenant { id name } user { id } } } }`, nil).Decode(t, &v)
	require.Len(t, v.Viewer.Memberships, 2)
	require.Equal(t, "Ada's", v.Viewer.Memberships[0].Tenant.Name)
	require.Equal(t, "OWNER", v.Viewer.Memberships[0].Role)
	require.Equal(t, bob.TenantID, v.Viewer.Memberships[1].Tenant.ID)
	require.Equal(t, "Bob's", v.Viewer.Memberships[1].Tenant.Name)
	require.Equal(t, "MEMBER", v.Viewer.Memberships[1].Role)
	require.Equal(t, ada.UserID, v.Viewer.Memberships[1].User.ID)

	// An API key belongs to its tenant: it sees that one only.
	_, key := sessCreateKey(t, env, ada.AccessToken, "script", "MEMBER")
	env.Do(t, key, `{ viewer { memberships { role tenant { id name } user { id } } } }`, nil).Decode(t, &v)
	require.Len(t, v.Viewer.Memberships, 1)
	require.Equal(t, ada.TenantID, v.Viewer.Memberships[0].Tenant.ID)

	const switchTenant = `mutation($r: String!, $t: ID!) { switchTenant(refreshToken: $r, tenantId: $t) {
		accessToken refreshToken viewer { role tenant { id } user { id email } } } }`
	// A tenant Ada has not joined is NOT_FOUND, like a missing one, and spends nothing.
	carol := env.SignUp(t, "", "Carol's")
	require.Equal(t, "NOT_FOUND", env.Do(t, "", switchTenant, map[string]any{"r": ada.RefreshToken, "t": carol.TenantID}).Code())
	require.Equal(t, "NOT_FOUND", env.Do(t, "", switchTenant, map[string]any{"r": ada.RefreshToken, "t": isoGlobalID("Tenant", uuid.New())}).Code())
	require.Equal(t, "UNAUTHENTICATED", env.Do(t, "", switchTenant, map[string]any{"r": "agr_forged", "t": bob.TenantID}).Code())

	sw := sessDecodeAuth(t, env.Do(t, "", switchTenant, map[string]any{"r": ada.RefreshToken, "t": bob.TenantID}), "switchTenant")
	require.Equal(t, bob.TenantID, sw.Viewer.Tenant.ID)
	require.Equal(t, "MEMBER", sw.Viewer.Role)
	require.Equal(t, ada.UserID, sw.Viewer.User.ID)
	require.Equal(t, bob.TenantID, sessViewerTenant(t, env, sw.AccessToken))
	// The new session refreshes in the new tenant; the old refresh token was spent.
	again := sessDecodeAuth(t, sessRefresh(t, env, sw.RefreshToken), "refreshSession")
	require.Equal(t, bob.TenantID, again.Viewer.Tenant.ID)
	require.Equal(t, "UNAUTHENTICATED", sessRefresh(t, env, ada.RefreshToken).Code())
}

func sessViewerTenant(t *testing.T, env *apptest.Env, token string) string {
	t.Helper()
	var out struct {
		Viewer struct{ Tenant struct{ ID string } }
	}
	env.Do(t, token, sessViewerRole, nil).Decode(t, &out)
	return out.Viewer.Tenant.ID
}

// TestChangePassword: changePassword checks the current password, revokes every session of the
// person in every tenant and answers with a new one; an API key cannot change it.
func TestChangePassword(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	ada := env.SignUp(t, "", "Ada's")
	bob := env.SignUp(t, "", "Bob's")
	inBob := memJoin(t, env, bob.AccessToken, ada, bob.TenantID, "MEMBER")
	second := sessDecodeAuth(t, sessLogIn(t, env, ada.Email, ada.Password, ""), "logIn")
	_, key := sessCreateKey(t, env, ada.AccessToken, "script", "MEMBER")

	const change = `mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, newPassword: $n) {
		accessToken refreshToken viewer { role tenant { id } user { id email } } } }`
	const next = "a new and longer passphrase"
	res := env.Do(t, ada.AccessToken, change, map[string]any{"c": "not my password", "n": next})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	require.Equal(t, "currentPassword", res.Errors[0].Extensions["field"])
	res = env.Do(t, ada.AccessToken, change, map[string]any{"c": ada.Password, "n": "short"})
	require.Equal(t, "newPassword", res.Errors[0].Extensions["field"], "%s", res.Body)
	require.Equal(t, "FORBIDDEN", env.Do(t, key, change, map[string]any{"c": ada.Password, "n": next}).Code())
	require.Equal(t, "UNAUTHENTICATED", env.Do(t, "", change, map[string]any{"c": ada.Password, "n": next}).Code())
	// Nothing changed so far.
	sessDecodeAuth(t, sessRefresh(t, env, second.RefreshToken), "refreshSession")

	changed := sessDecodeAuth(t, env.Do(t, ada.AccessToken, change, map[string]any{"c": ada.Password, "n": next}), "changePassword")
	require.Equal(t, ada.TenantID, changed.Viewer.Tenant.ID)
	for name, tok := range map[string]string{"sign-up": ada.RefreshToken, "other tenant": inBob.RefreshToken} {
		require.Equal(t, "UNAUTHENTICATED", sessRefresh(t, env, tok).Code(), "the %s session was not revoked", name)
	}
	sessDecodeAuth(t, sessRefresh(t, env, changed.RefreshToken), "refreshSession")
	require.Equal(t, "UNAUTHENTICATED", sessLogIn(t, env, ada.Email, ada.Password, "").Code())
	sessDecodeAuth(t, sessLogIn(t, env, ada.Email, next, bob.TenantID), "logIn")
}
