package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

const (
	sessRefreshMutation = `mutation($t: String!) { refreshSession(refreshToken: $t) {
		accessToken refreshToken expiresAt viewer { role tenant { id } user { id } } } }`
	sessLogInMutation = `mutation($in: LogInInput!) { logIn(input: $in) {
		accessToken refreshToken viewer { role tenant { id } user { id email } } } }`
	sessCreateKeyMutation = `mutation($in: CreateApiKeyInput!) { createApiKey(input: $in) {
		secret apiKey { id name prefix role createdAt revokedAt } } }`
	sessAddMemberMutation = `mutation($in: AddMemberInput!) { addMember(input: $in) {
		role pending invitationToken user { id email } } }`
	sessViewerRole = `{ viewer { role tenant { id } } }`
)

type sessAuthPayload struct {
	AccessToken  string
	RefreshToken string
	Viewer       struct {
		Role   string
		Tenant struct{ ID string }
		User   struct{ ID, Email string }
	}
}

type sessAPIKey struct {
	ID        string
	Name      string
	Prefix    string
	Role      string
	RevokedAt *string
}

// sessRefresh spends refreshToken; the answer may be an error.
func sessRefresh(t *testing.T, env *apptest.Env, refreshToken string) *apptest.Response {
	t.Helper()
	return env.Do(t, "", sessRefreshMutation, map[string]any{"t": refreshToken})
}

// sessLogIn logs in; tenantID may be empty.
func sessLogIn(t *testing.T, env *apptest.Env, email, password, tenantID string) *apptest.Response {
	t.Helper()
	in := map[string]any{"email": email, "password": password}
	if tenantID != "" {
		in["tenantId"] = tenantID
	}
	return env.Do(t, "", sessLogInMutation, map[string]any{"in": in})
}

func sessDecodeAuth(t *testing.T, res *apptest.Response, field string) sessAuthPayload {
	t.Helper()
	var out map[string]sessAuthPayload
	res.Decode(t, &out)
	p, ok := out[field]
	require.True(t, ok, "no %s in %s", field, res.Data)
	require.NotEmpty(t, p.AccessToken)
	require.NotEmpty(t, p.RefreshToken)
	return p
}

// sessCreateKey makes an API key with role as the caller and returns it with its secret.
func sessCreateKey(t *testing.T, env *apptest.Env, token, name, role string) (sessAPIKey, string) {
	t.Helper()
	res := env.Do(t, token, sessCreateKeyMutation, map[string]any{"in": map[string]any{"name": name, "role": role}})
	var out struct {
		CreateAPIKey struct {
			Secret string
			APIKey sessAPIKey
		} `json:"createApiKey"`
	}
	res.Decode(t, &out)
	require.NotEmpty(t, out.CreateAPIKey.Secret)
	return out.CreateAPIKey.APIKey, out.CreateAPIKey.Secret
}

// sessRole returns the viewer's role for a credential, failing unless the request succeeds.
func sessRole(t *testing.T, env *apptest.Env, token string) string {
	t.Helper()
	res := env.Do(t, token, sessViewerRole, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out struct{ Viewer struct{ Role string } }
	res.Decode(t, &out)
	return out.Viewer.Role
}

// sessPost is env.Do without testing.T, for use from several goroutines.
func sessPost(ctx context.Context, env *apptest.Env, token, query string, vars map[string]any) (*apptest.Response, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := env.Server.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	out := &apptest.Response{Status: res.StatusCode, Body: raw}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("body %q: %w", raw, err)
	}
	return out, nil
}

// sessScanDatabase reads every column of every table of the public schema (as text, and bytea
// also as raw bytes) and returns, for each needle, the columns it appears in.
func sessScanDatabase(t *testing.T, ownerURL string, needles []string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	conn := systemConn(t, ownerURL)

	rows, err := conn.Query(ctx, `SELECT table_name::text, column_name::text, data_type::text
		FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`)
	require.NoError(t, err)
	type column struct{ table, name, typ string }
	var cols []column
	for rows.Next() {
		var c column
		require.NoError(t, rows.Scan(&c.table, &c.name, &c.typ))
		cols = append(cols, c)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, cols)

	found := map[string][]string{}
	for _, c := range cols {
		ident := pgx.Identifier{c.name}.Sanitize()
		from := pgx.Identifier{c.table}.Sanitize()
		var q string
		if c.typ == "bytea" {
			q = fmt.Sprintf(`SELECT %s, %s::text FROM %s`, ident, ident, from)
		} else {
			q = fmt.Sprintf(`SELECT NULL::bytea, %s::text FROM %s`, ident, from)
		}
		rows, err := conn.Query(ctx, q)
		require.NoError(t, err, "%s.%s", c.table, c.name)
		for rows.Next() {
			var raw []byte
			var text *string
			require.NoError(t, rows.Scan(&raw, &text), "%s.%s", c.table, c.name)
			for _, n := range needles {
				if (text != nil && strings.Contains(*text, n)) || bytes.Contains(raw, []byte(n)) {
					found[n] = append(found[n], c.table+"."+c.name)
				}
			}
		}
		require.NoError(t, rows.Err(), "%s.%s", c.table, c.name)
	}
	return found
}

func TestRefreshRotationAndReuse(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	// A second, independent session of the same user (another family).
	other := sessDecodeAuth(t, sessLogIn(t, env, s.Email, s.Password, ""), "logIn")

	first := sessDecodeAuth(t, sessRefresh(t, env, s.RefreshToken), "refreshSession")
	require.NotEqual(t, s.RefreshToken, first.RefreshToken)
	require.NotEqual(t, s.AccessToken, first.AccessToken)
	require.True(t, strings.HasPrefix(first.RefreshToken, "agr_"), first.RefreshToken)
	require.Equal(t, "OWNER", first.Viewer.Role)
	require.Equal(t, s.TenantID, first.Viewer.Tenant.ID)
	require.Equal(t, s.UserID, first.Viewer.User.ID)
	require.Equal(t, "OWNER", sessRole(t, env, first.AccessToken))

	// The family keeps rotating while the newest token is used.
	second := sessDecodeAuth(t, sessRefresh(t, env, first.RefreshToken), "refreshSession")

	// Reusing a spent token after the grace window fails and revokes the family: the newest
	// token dies with it.
	sessAgeRotations(t, env)
	res := sessRefresh(t, env, first.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)
	res = sessRefresh(t, env, second.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "the family's newest token survived a reuse: %s", res.Body)
	res = sessRefresh(t, env, s.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)

	// Another session of the same user is not affected.
	sessDecodeAuth(t, sessRefresh(t, env, other.RefreshToken), "refreshSession")

	// Garbage is UNAUTHENTICATED too.
	for _, tok := range []string{"", "agr_", "agr_nope", "not-a-token"} {
		res = sessRefresh(t, env, tok)
		require.Equal(t, "UNAUTHENTICATED", res.Code(), "%q: %s", tok, res.Body)
	}
}

// sessAgeRotations moves every spent refresh token's rotation past the grace window, as if
// it had been spent a minute ago.
func sessAgeRotations(t *testing.T, env *apptest.Env) {
	t.Helper()
	_, err := systemConn(t, env.OwnerURL).Exec(context.Background(), `UPDATE refresh_tokens SET rotated_at = rotated_at - interval '1 minute' WHERE rotated_at IS NOT NULL`)
	require.NoError(t, err)
}

// Two tabs (or two requests of one tab) refreshing one session at the same moment both stay
// logged in: every concurrent refresh of one token answers with the same new refresh token,
// and the family lives on.
func TestRefreshConcurrentSameToken(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")

	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := make(chan struct{})
	type result struct {
		res *apptest.Response
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := sessPost(ctx, env, "", sessRefreshMutation, map[string]any{"t": s.RefreshToken})
			results[i] = result{res, err}
		}()
	}
	close(start)
	wg.Wait()

	refreshTokens := map[string]bool{}
	for i, r := range results {
		require.NoError(t, r.err, "request %d", i)
		require.Empty(t, r.res.Code(), "request %d: %s", i, r.res.Body)
		p := sessDecodeAuth(t, r.res, "refreshSession")
		require.Equal(t, "OWNER", sessRole(t, env, p.AccessToken), "request %d's access token", i)
		refreshTokens[p.RefreshToken] = true
	}
	require.Len(t, refreshTokens, 1, "concurrent refreshes of one token must answer with one new refresh token")
	var next string
	for tok := range refreshTokens {
		next = tok
	}
	require.NotEqual(t, s.RefreshToken, next)

	// The session goes on from the new token.
	third := sessDecodeAuth(t, sessRefresh(t, env, next), "refreshSession")

	// Within the window, a token whose successor is spent is a reuse all the same: it revokes
	// the family.
	res := sessRefresh(t, env, s.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)
	res = sessRefresh(t, env, third.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "the family survived a reuse: %s", res.Body)
}

// A spent token presented again after the grace window revokes its family even when its
// successor is unspent.
func TestRefreshReuseAfterGrace(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	first := sessDecodeAuth(t, sessRefresh(t, env, s.RefreshToken), "refreshSession")
	again := sessDecodeAuth(t, sessRefresh(t, env, s.RefreshToken), "refreshSession")
	require.Equal(t, first.RefreshToken, again.RefreshToken, "a repeat within the grace window answers with the same token")

	sessAgeRotations(t, env)
	res := sessRefresh(t, env, s.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)
	res = sessRefresh(t, env, first.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "the unspent successor survived a reuse: %s", res.Body)
}

func TestLogOutRevokesRefreshToken(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	rotated := sessDecodeAuth(t, sessRefresh(t, env, s.RefreshToken), "refreshSession")

	res := env.Do(t, "", `mutation($t: String!) { logOut(refreshToken: $t) }`, map[string]any{"t": rotated.RefreshToken})
	var out struct{ LogOut bool }
	res.Decode(t, &out)
	require.True(t, out.LogOut)

	res = sessRefresh(t, env, rotated.RefreshToken)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "refresh token still works after logOut: %s", res.Body)

	// Logging out with an unknown token answers the same (no oracle).
	res = env.Do(t, "", `mutation { logOut(refreshToken: "agr_unknown") }`, nil)
	res.Decode(t, &out)
	require.True(t, out.LogOut)
}

func TestLogIn(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	a := env.SignUp(t, "", "T1")
	b := env.SignUp(t, "", "T2")
	c := env.SignUp(t, "", "T3")

	// Wrong password and unknown email are indistinguishable.
	wrong := sessLogIn(t, env, a.Email, "wrong password!", "")
	unknown := sessLogIn(t, env, "nobody-"+a.Email, a.Password, "")
	require.Equal(t, "UNAUTHENTICATED", wrong.Code(), "%s", wrong.Body)
	require.Equal(t, "UNAUTHENTICATED", unknown.Code(), "%s", unknown.Body)
	require.Equal(t, wrong.Errors[0].Message, unknown.Errors[0].Message)

	// The owner of T2 invites A, who already has an account, and A accepts.
	memJoin(t, env, b.AccessToken, a, b.TenantID, "MEMBER")

	// Without tenantId: the first tenant joined.
	p := sessDecodeAuth(t, sessLogIn(t, env, a.Email, a.Password, ""), "logIn")
	require.Equal(t, a.TenantID, p.Viewer.Tenant.ID)
	require.Equal(t, "OWNER", p.Viewer.Role)
	require.Equal(t, a.UserID, p.Viewer.User.ID)

	// With tenantId T2: the role there, and the token acts in T2.
	p = sessDecodeAuth(t, sessLogIn(t, env, a.Email, a.Password, b.TenantID), "logIn")
	require.Equal(t, b.TenantID, p.Viewer.Tenant.ID)
	require.Equal(t, "MEMBER", p.Viewer.Role)
	res := env.Do(t, p.AccessToken, sessViewerRole, nil)
	var v struct {
		Viewer struct {
			Role   string
			Tenant struct{ ID string }
		}
	}
	res.Decode(t, &v)
	require.Equal(t, "MEMBER", v.Viewer.Role)
	require.Equal(t, b.TenantID, v.Viewer.Tenant.ID)
	// ...and so does a refresh of that session.
	r := sessDecodeAuth(t, sessRefresh(t, env, p.RefreshToken), "refreshSession")
	require.Equal(t, b.TenantID, r.Viewer.Tenant.ID)
	require.Equal(t, "MEMBER", r.Viewer.Role)

	// A tenant A is not in is NOT_FOUND.
	res = sessLogIn(t, env, a.Email, a.Password, c.TenantID)
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	// A wrong password with a tenantId is still UNAUTHENTICATED.
	res = sessLogIn(t, env, a.Email, "wrong password!", b.TenantID)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)
}

// sessSignUp signs up without verifying the address (apptest's SignUp verifies it).
func sessSignUp(t *testing.T, env *apptest.Env, email, password string) sessAuthPayload {
	t.Helper()
	res := env.Do(t, "", `mutation($in: SignUpInput!) { signUp(input: $in) { accessToken refreshToken viewer { role tenant { id } user { id email } } } }`,
		map[string]any{"in": map[string]any{"email": email, "password": password, "tenantName": "Own of " + email}})
	return sessDecodeAuth(t, res, "signUp")
}

const sessAccept = `mutation($t: String!) { acceptInvitation(token: $t) }`

type sessAdded struct {
	AddMember struct {
		Role            string
		Pending         bool
		InvitationToken string
		User            struct{ ID, Email string }
	}
}

// TestInvitationNeedsTokenAndVerifiedEmail performs the attacks on invitations: signing up
// with an invited address before (or without) the invitation gets no seat; the invitation is
// joined only with its token, by a signed-in person whose verified email is the invited one;
// addMember answers the same for an address with an account and one without, and makes no
// account for the latter.
func TestInvitationNeedsTokenAndVerifiedEmail(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "Inviting")
	existing := env.SignUp(t, "", "Existing's own")
	email := fmt.Sprintf("invitee-%d@example.com", time.Now().UnixNano())
	const password = "correct horse battery"

	// The answers for an unknown address and for an account's are the same (but for the email
	// and the fresh ids and tokens), and no account is made for the unknown one.
	var unknown, known sessAdded
	env.Do(t, owner.AccessToken, sessAddMemberMutation, map[string]any{"in": map[string]any{"email": email, "role": "ADMIN"}}).Decode(t, &unknown)
	env.Do(t, owner.AccessToken, sessAddMemberMutation, map[string]any{"in": map[string]any{"email": existing.Email, "role": "ADMIN"}}).Decode(t, &known)
	for _, a := range []sessAdded{unknown, known} {
		require.True(t, a.AddMember.Pending)
		require.Equal(t, "ADMIN", a.AddMember.Role)
		require.NotEmpty(t, a.AddMember.InvitationToken)
	}
	require.NotEqual(t, existing.UserID, known.AddMember.User.ID, "the answer names the existing account")
	conn, err := pgx.Connect(t.Context(), env.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var users int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM users WHERE lower(email) = lower($1)`, email).Scan(&users))
	require.Zero(t, users, "addMember made an account for an unknown address")
	// The account was not added without its consent.
	res := sessLogIn(t, env, existing.Email, existing.Password, owner.TenantID)
	require.Equal(t, "NOT_FOUND", res.Code(), "an invitation granted the seat without its token: %s", res.Body)
	// Both addresses got the invitation's link.
	require.Equal(t, unknown.AddMember.InvitationToken, env.LinkToken(t, email, "invited", 1))

	// Someone signs up with the invited address, without the token: an account and a tenant of
	// their own, never the inviting tenant's seat.
	own := sessSignUp(t, env, email, password)
	require.NotEqual(t, owner.TenantID, own.Viewer.Tenant.ID)
	res = sessLogIn(t, env, email, password, owner.TenantID)
	require.Equal(t, "NOT_FOUND", res.Code(), "signing up with an invited address granted the seat: %s", res.Body)

	// With the token, but the address not verified yet: FORBIDDEN.
	res = env.Do(t, own.AccessToken, sessAccept, map[string]any{"t": unknown.AddMember.InvitationToken})
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	env.VerifyEmail(t, email)

	// A forged token, and the token of another address's invitation, are NOT_FOUND.
	res = env.Do(t, own.AccessToken, sessAccept, map[string]any{"t": "agi_forged"})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	res = env.Do(t, own.AccessToken, sessAccept, map[string]any{"t": known.AddMember.InvitationToken})
	require.Equal(t, "NOT_FOUND", res.Code(), "another address's invitation was accepted: %s", res.Body)
	res = env.Do(t, existing.AccessToken, sessAccept, map[string]any{"t": unknown.AddMember.InvitationToken})
	require.Equal(t, "NOT_FOUND", res.Code(), "another address's invitation was accepted: %s", res.Body)

	// The invited person, verified, with the token: joins as ADMIN; the token works once.
	res = env.Do(t, own.AccessToken, sessAccept, map[string]any{"t": unknown.AddMember.InvitationToken})
	require.Empty(t, res.Errors, "%s", res.Body)
	p := sessDecodeAuth(t, sessLogIn(t, env, email, password, owner.TenantID), "logIn")
	require.Equal(t, "ADMIN", p.Viewer.Role)
	require.Equal(t, own.Viewer.User.ID, p.Viewer.User.ID)
	res = env.Do(t, own.AccessToken, sessAccept, map[string]any{"t": unknown.AddMember.InvitationToken})
	require.Equal(t, "NOT_FOUND", res.Code())

	// Inviting an address again replaces the earlier token; withdrawing (removeMember with the
	// pending member's id) ends the invitation.
	var again, third sessAdded
	env.Do(t, owner.AccessToken, sessAddMemberMutation, map[string]any{"in": map[string]any{"email": existing.Email, "role": "MEMBER"}}).Decode(t, &again)
	res = env.Do(t, existing.AccessToken, sessAccept, map[string]any{"t": known.AddMember.InvitationToken})
	require.Equal(t, "NOT_FOUND", res.Code(), "a replaced invitation token still works: %s", res.Body)
	env.Do(t, owner.AccessToken, sessAddMemberMutation, map[string]any{"in": map[string]any{"email": existing.Email, "role": "MEMBER"}}).Decode(t, &third)
	res = env.Do(t, owner.AccessToken, memRemove, map[string]any{"u": third.AddMember.User.ID})
	require.Empty(t, res.Errors, "%s", res.Body)
	res = env.Do(t, existing.AccessToken, sessAccept, map[string]any{"t": third.AddMember.InvitationToken})
	require.Equal(t, "NOT_FOUND", res.Code(), "a withdrawn invitation still works: %s", res.Body)
}

// TestSignUpWithInvitationTokenDoesNotJoin: signUp's invitationToken grants nothing; the
// invitation waits for a verified address and acceptInvitation.
func TestSignUpWithInvitationTokenDoesNotJoin(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "Inviting")
	email := fmt.Sprintf("invitee-%d@example.com", time.Now().UnixNano())
	var added sessAdded
	env.Do(t, owner.AccessToken, sessAddMemberMutation, map[string]any{"in": map[string]any{"email": email, "role": "MEMBER"}}).Decode(t, &added)
	res := env.Do(t, "", `mutation($in: SignUpInput!) { signUp(input: $in) { accessToken } }`, map[string]any{"in": map[string]any{
		"email": email, "password": "correct horse battery", "tenantName": "Mine", "invitationToken": added.AddMember.InvitationToken,
	}})
	require.Empty(t, res.Errors, "%s", res.Body)
	res = sessLogIn(t, env, email, "correct horse battery", owner.TenantID)
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "")

	key, secret := sessCreateKey(t, env, owner.AccessToken, "ci", "MEMBER")
	require.True(t, strings.HasPrefix(secret, "agk_"), secret)
	require.True(t, strings.HasPrefix(key.Prefix, "agk_"), key.Prefix)
	require.True(t, strings.HasPrefix(secret, key.Prefix), "prefix %q is not a prefix of the secret", key.Prefix)
	suffix := strings.TrimPrefix(secret, key.Prefix)
	require.GreaterOrEqual(t, len(strings.TrimLeft(suffix, "_")), 32, "the secret part is too short: %q", secret)
	require.Equal(t, "MEMBER", key.Role)
	require.Equal(t, "ci", key.Name)
	require.Nil(t, key.RevokedAt)

	// The key authenticates with its role.
	require.Equal(t, "MEMBER", sessRole(t, env, secret))

	// The secret is never shown again.
	res := env.Do(t, owner.AccessToken, `{ apiKeys { id prefix role } }`, nil)
	require.NotContains(t, string(res.Body), suffix)
	var list struct {
		APIKeys []sessAPIKey `json:"apiKeys"`
	}
	res.Decode(t, &list)
	require.Len(t, list.APIKeys, 1)
	require.Equal(t, key.ID, list.APIKeys[0].ID)

	// Nothing in the database holds the secret (or the refresh token) in clear. The prefix is
	// stored in clear, which shows that the scan reads the key's row.
	needles := []string{secret, suffix, strings.TrimLeft(suffix, "_"), owner.RefreshToken, key.Prefix}
	found := sessScanDatabase(t, env.OwnerURL, needles)
	require.NotEmpty(t, found[key.Prefix], "the scan did not see the key's prefix: the scan is broken")
	for _, n := range needles[:4] {
		require.Empty(t, found[n], "secret %q stored in clear in %v", n, found[n])
	}

	// Revocation takes effect on the very next request.
	res = env.Do(t, owner.AccessToken, `mutation($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }`, map[string]any{"id": key.ID})
	var rev struct {
		RevokeAPIKey struct {
			ID        string
			RevokedAt *string
		} `json:"revokeApiKey"`
	}
	res.Decode(t, &rev)
	require.Equal(t, key.ID, rev.RevokeAPIKey.ID)
	require.NotNil(t, rev.RevokeAPIKey.RevokedAt)
	requireUnauthenticated401(t, env.Do(t, secret, sessViewerRole, nil), "revoked key")

	// A key with a well-formed prefix and a wrong secret is refused.
	requireUnauthenticated401(t, env.Do(t, key.Prefix+"_"+strings.Repeat("A", 43), sessViewerRole, nil), "forged key")

	// No key with a role above the creator's: an ADMIN (acting through an ADMIN key) cannot make
	// an OWNER key, but can make a MEMBER one.
	_, adminSecret := sessCreateKey(t, env, owner.AccessToken, "admin", "ADMIN")
	require.Equal(t, "ADMIN", sessRole(t, env, adminSecret))
	res = env.Do(t, adminSecret, sessCreateKeyMutation, map[string]any{"in": map[string]any{"name": "escalate", "role": "OWNER"}})
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	require.NotContains(t, string(res.Body), "agk_")
	made, _ := sessCreateKey(t, env, adminSecret, "member", "MEMBER")
	require.Equal(t, "MEMBER", made.Role)
}

func TestRoleEnforcement(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "")
	_, viewer := sessCreateKey(t, env, owner.AccessToken, "viewer", "VIEWER")
	_, member := sessCreateKey(t, env, owner.AccessToken, "member", "MEMBER")
	_, admin := sessCreateKey(t, env, owner.AccessToken, "admin", "ADMIN")
	require.Equal(t, "VIEWER", sessRole(t, env, viewer))
	require.Equal(t, "MEMBER", sessRole(t, env, member))
	require.Equal(t, "ADMIN", sessRole(t, env, admin))

	const update = `mutation { updateAgentSettings(input: {maxRetries: 7}) { maxRetries } }`
	const read = `{ agentSettings { maxRetries personality } }`
	createKey := func(role string) map[string]any {
		return map[string]any{"in": map[string]any{"name": "k-" + role, "role": role}}
	}
	addMember := func(role string) map[string]any {
		return map[string]any{"in": map[string]any{"email": fmt.Sprintf("%s-%d@example.com", strings.ToLower(role), time.Now().UnixNano()), "role": role}}
	}
	countKeys := func() int {
		var out struct {
			APIKeys []sessAPIKey `json:"apiKeys"`
		}
		env.Do(t, owner.AccessToken, `{ apiKeys { id } }`, nil).Decode(t, &out)
		return len(out.APIKeys)
	}
	keysBefore := countKeys()

	// VIEWER: reads settings, cannot change them.
	res := env.Do(t, viewer, read, nil)
	var s struct{ AgentSettings struct{ MaxRetries int } }
	res.Decode(t, &s)
	require.Equal(t, 3, s.AgentSettings.MaxRetries)
	res = env.Do(t, viewer, update, nil)
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	res = env.Do(t, viewer, sessCreateKeyMutation, createKey("VIEWER"))
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	res = env.Do(t, viewer, read, nil)
	res.Decode(t, &s)
	require.Equal(t, 3, s.AgentSettings.MaxRetries, "a VIEWER's refused update changed the settings")

	// MEMBER: may change settings, may not create keys or add members.
	res = env.Do(t, member, update, nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	res = env.Do(t, member, sessCreateKeyMutation, createKey("MEMBER"))
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	res = env.Do(t, member, sessCreateKeyMutation, createKey("VIEWER"))
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	res = env.Do(t, member, sessAddMemberMutation, addMember("VIEWER"))
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	res = env.Do(t, member, `{ apiKeys { id } }`, nil)
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)

	// ADMIN: may add members up to ADMIN, not an OWNER.
	res = env.Do(t, admin, sessAddMemberMutation, addMember("OWNER"))
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	res = env.Do(t, admin, sessAddMemberMutation, addMember("ADMIN"))
	require.Empty(t, res.Errors, "%s", res.Body)

	require.Equal(t, keysBefore, countKeys(), "a refused createApiKey made a key")
}

// The viewer of an auth payload resolves completely although the request itself is anonymous (or
// made with another user's credential).
func TestAuthPayloadViewer(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	other := env.SignUp(t, "", "Other")
	email := fmt.Sprintf("payload-%d@example.com", time.Now().UnixNano())
	const fields = `accessToken refreshToken viewer { role user { id email name } tenant { id name } }`
	type payload struct {
		AccessToken, RefreshToken string
		Viewer                    struct {
			Role string
			User struct {
				ID, Email string
				Name      *string
			}
			Tenant struct{ ID, Name string }
		}
	}
	check := func(p payload) {
		t.Helper()
		require.Equal(t, "OWNER", p.Viewer.Role)
		require.Equal(t, email, p.Viewer.User.Email)
		require.NotNil(t, p.Viewer.User.Name)
		require.Equal(t, "Ada", *p.Viewer.User.Name)
		require.Equal(t, "Payload Inc", p.Viewer.Tenant.Name)
	}

	var up struct{ SignUp payload }
	env.Do(t, "", `mutation($in: SignUpInput!) { signUp(input: $in) { `+fields+` } }`, map[string]any{"in": map[string]any{
		"email": email, "password": "correct horse battery staple", "name": "Ada", "tenantName": "Payload Inc",
	}}).Decode(t, &up)
	check(up.SignUp)

	// Logging in while sending another user's token still describes the new session.
	var in struct{ LogIn payload }
	env.Do(t, other.AccessToken, `mutation($in: LogInInput!) { logIn(input: $in) { `+fields+` } }`, map[string]any{"in": map[string]any{
		"email": email, "password": "correct horse battery staple",
	}}).Decode(t, &in)
	check(in.LogIn)
	require.Equal(t, up.SignUp.Viewer.User.ID, in.LogIn.Viewer.User.ID)
	require.Equal(t, up.SignUp.Viewer.Tenant.ID, in.LogIn.Viewer.Tenant.ID)

	var ref struct{ RefreshSession payload }
	env.Do(t, "", `mutation($t: String!) { refreshSession(refreshToken: $t) { `+fields+` } }`, map[string]any{"t": in.LogIn.RefreshToken}).Decode(t, &ref)
	check(ref.RefreshSession)
}
