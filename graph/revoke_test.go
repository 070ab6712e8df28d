package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// revokeEnd bounds how long a test waits for a stream to end after its credential changed. The
// server ends it when the change is committed (no polling); the bound only keeps a broken
// server from hanging the test.
const revokeEnd = 5 * time.Second

const revokeActivity = `subscription { tenantActivity { seq type } }`

// sseStream is an open graphql-sse stream (POST with Accept: text/event-stream).
type sseStream struct {
	ended chan struct{}
	body  chan string
}

// revokeSSE opens a tenantActivity subscription over SSE with token and returns once the server
// has started the stream.
func revokeSSE(t *testing.T, env *apptest.Env, token string) *sseStream {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": revokeActivity})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	s := &sseStream{ended: make(chan struct{}), body: make(chan string, 1)}
	started := make(chan struct{})
	go func() {
		defer close(s.ended)
		defer res.Body.Close()
		var all strings.Builder
		r := bufio.NewReader(res.Body)
		once := false
		for {
			line, err := r.ReadString('\n')
			all.WriteString(line)
			if !once {
				once = true
				close(started)
			}
			if err != nil {
				s.body <- all.String()
				return
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(revokeEnd):
		t.Fatal("the SSE stream did not start")
	}
	return s
}

// requireEnded fails unless the stream ended within revokeEnd.
func (s *sseStream) requireEnded(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(revokeEnd):
		t.Fatalf("%s: the SSE stream is still open", what)
	}
}

// requireOpen fails if the stream has already ended.
func (s *sseStream) requireOpen(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.ended:
		t.Fatalf("%s: the SSE stream ended: %s", what, <-s.body)
	default:
	}
}

// revokeStreams opens a tenantActivity subscription over a WebSocket and over SSE with token.
func revokeStreams(t *testing.T, env *apptest.Env, token string) (*apptest.Subscription, *sseStream) {
	t.Helper()
	ws := apptest.Subscribe(t, env.Server.URL, token, revokeActivity, nil)
	return ws, revokeSSE(t, env, token)
}

func revokeRequireEnded(t *testing.T, what string, ws *apptest.Subscription, sse *sseStream) {
	t.Helper()
	require.True(t, ws.WaitEnd(revokeEnd), "%s: the WebSocket is still open", what)
	sse.requireEnded(t, what)
}

// TestLogOutEndsAccessTokenAndStreams: after logOut, the session's access token is refused on
// HTTP (401), and its open WebSocket and SSE streams end; another session of the same person
// goes on.
func TestLogOutEndsAccessTokenAndStreams(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	other := sessDecodeAuth(t, sessLogIn(t, env, s.Email, s.Password, ""), "logIn")
	require.Equal(t, "OWNER", sessRole(t, env, s.AccessToken))
	ws, sse := revokeStreams(t, env, s.AccessToken)
	otherWS, otherSSE := revokeStreams(t, env, other.AccessToken)

	res := env.Do(t, "", `mutation($t: String!) { logOut(refreshToken: $t) }`, map[string]any{"t": s.RefreshToken})
	require.Empty(t, res.Errors, "%s", res.Body)

	requireUnauthenticated401(t, env.Do(t, s.AccessToken, sessViewerRole, nil), "access token after logOut")
	revokeRequireEnded(t, "logged out", ws, sse)
	require.Equal(t, "OWNER", sessRole(t, env, other.AccessToken), "the other session was logged out too")
	otherSSE.requireOpen(t, "another session's stream")
	require.False(t, otherWS.Done, "another session's socket ended")
}

// TestChangePasswordEndsOldAccessTokens: changing the password ends every other session's
// access token at once (HTTP and streams); the session the change returns works.
func TestChangePasswordEndsOldAccessTokens(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	ws, sse := revokeStreams(t, env, s.AccessToken)
	res := env.Do(t, s.AccessToken, `mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, newPassword: $n) { accessToken } }`,
		map[string]any{"c": s.Password, "n": "another long passphrase"})
	var out struct{ ChangePassword struct{ AccessToken string } }
	res.Decode(t, &out)
	requireUnauthenticated401(t, env.Do(t, s.AccessToken, sessViewerRole, nil), "access token after the password changed")
	revokeRequireEnded(t, "password changed", ws, sse)
	require.Equal(t, "OWNER", sessRole(t, env, out.ChangePassword.AccessToken))
}

// TestRemovedAdminLosesPowersAtOnce: a removed ADMIN's access token cannot mint an API key (or
// do anything else) right after removeMember, and their open streams end.
func TestRemovedAdminLosesPowersAtOnce(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "Acme")
	acct := env.SignUp(t, "", "Admin's own")
	admin := memJoin(t, env, owner.AccessToken, acct, owner.TenantID, "ADMIN")
	sessCreateKey(t, env, admin.AccessToken, "while an admin", "ADMIN") // warms the role cache
	ws, sse := revokeStreams(t, env, admin.AccessToken)

	res := env.Do(t, owner.AccessToken, memRemove, map[string]any{"u": acct.UserID})
	require.Empty(t, res.Errors, "%s", res.Body)

	res = env.Do(t, admin.AccessToken, sessCreateKeyMutation, map[string]any{"in": map[string]any{"name": "after removal", "role": "ADMIN"}})
	requireUnauthenticated401(t, res, "a removed admin mints an API key")
	revokeRequireEnded(t, "removed", ws, sse)
}

// TestDemotedAdminLosesPowersAtOnce: an ADMIN demoted to VIEWER is a VIEWER on the next
// request (createApiKey is FORBIDDEN) and their ADMIN-only streams (tenantActivity) end.
func TestDemotedAdminLosesPowersAtOnce(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "Acme")
	acct := env.SignUp(t, "", "Admin's own")
	admin := memJoin(t, env, owner.AccessToken, acct, owner.TenantID, "ADMIN")
	require.Equal(t, "ADMIN", sessRole(t, env, admin.AccessToken))
	ws, sse := revokeStreams(t, env, admin.AccessToken)

	res := env.Do(t, owner.AccessToken, memSetRole, map[string]any{"u": acct.UserID, "r": "VIEWER"})
	require.Empty(t, res.Errors, "%s", res.Body)

	require.Equal(t, "VIEWER", sessRole(t, env, admin.AccessToken), "the token keeps the role it was issued with")
	res = env.Do(t, admin.AccessToken, sessCreateKeyMutation, map[string]any{"in": map[string]any{"name": "after demotion", "role": "VIEWER"}})
	require.Equal(t, "FORBIDDEN", res.Code(), "a demoted admin mints an API key: %s", res.Body)
	revokeRequireEnded(t, "demoted", ws, sse)
	// Resubscribing as a VIEWER is refused (tenantActivity is for ADMIN or higher).
	again := apptest.Subscribe(t, env.Server.URL, admin.AccessToken, revokeActivity, nil)
	_, ok := again.Next(revokeEnd)
	require.False(t, ok)
	require.Contains(t, string(again.Err), "FORBIDDEN")
}

// TestRevokedAPIKeyStreamsEnd: revoking an API key ends its open WebSocket and SSE streams at
// once, and it authenticates nothing afterwards.
func TestRevokedAPIKeyStreamsEnd(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "")
	key, secret := sessCreateKey(t, env, owner.AccessToken, "integration", "ADMIN")
	ws, sse := revokeStreams(t, env, secret)
	ownWS, ownSSE := revokeStreams(t, env, owner.AccessToken)

	res := env.Do(t, owner.AccessToken, `mutation($id: ID!) { revokeApiKey(id: $id) { revokedAt } }`, map[string]any{"id": key.ID})
	require.Empty(t, res.Errors, "%s", res.Body)

	revokeRequireEnded(t, "key revoked", ws, sse)
	requireUnauthenticated401(t, env.Do(t, secret, sessViewerRole, nil), "revoked key")
	// The owner's own streams are unaffected.
	require.Equal(t, "OWNER", sessRole(t, env, owner.AccessToken))
	ownSSE.requireOpen(t, "the owner's stream")
	require.False(t, ownWS.Done)
}

// TestRemovalReachesAnotherProcess: with two API processes on one database and Redis, an
// ADMIN removed through one process is refused by the other on the next request (its cached
// role is dropped by the change message, not left to expire) and their socket on the other
// process ends.
func TestRemovalReachesAnotherProcess(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{NoWork: true})
	cfg := a.App.Config
	b := apptest.Start(t, apptest.Options{NoWork: true, DatabaseURL: a.OwnerURL, Env: map[string]string{
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(cfg.MasterKey), "AGENTRY_REDIS_PREFIX": cfg.RedisPrefix,
	}})
	owner := a.SignUp(t, "", "Acme")
	acct := a.SignUp(t, "", "Admin's own")
	admin := memJoin(t, a, owner.AccessToken, acct, owner.TenantID, "ADMIN")
	require.Equal(t, "ADMIN", sessRole(t, b, admin.AccessToken)) // b remembers the role
	ws, sse := revokeStreams(t, b, admin.AccessToken)

	res := a.Do(t, owner.AccessToken, memRemove, map[string]any{"u": acct.UserID})
	require.Empty(t, res.Errors, "%s", res.Body)

	revokeRequireEnded(t, "removed through another process", ws, sse)
	// The socket ended because b was told; by then b has dropped what it remembered.
	res = b.Do(t, admin.AccessToken, sessCreateKeyMutation, map[string]any{"in": map[string]any{"name": "after removal", "role": "ADMIN"}})
	requireUnauthenticated401(t, res, "a removed admin mints an API key on another process")
}
