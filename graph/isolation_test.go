package graph_test

import (
	"encoding/base64"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// isoGlobalID builds a global id the way the server does: base64url("Type:uuid").
func isoGlobalID(typ string, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + id.String()))
}

// isoDecodeID returns the type and uuid inside a server-made global id.
func isoDecodeID(t *testing.T, id string) (string, uuid.UUID) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err, "global id %q", id)
	for i := range raw {
		if raw[i] == ':' {
			u, err := uuid.Parse(string(raw[i+1:]))
			require.NoError(t, err, "global id %q", raw)
			return string(raw[:i]), u
		}
	}
	t.Fatalf("global id %q has no type", raw)
	return "", uuid.Nil
}

// isoErr is the part of an error answer a client can see and compare.
type isoErr struct{ Code, Message string }

// requireNodeNull checks that node(id) answered null without an error: what a missing object,
// another tenant's and a malformed id all get.
func requireNodeNull(t *testing.T, res *apptest.Response, what string) {
	t.Helper()
	require.Empty(t, res.Errors, "%s: %s", what, res.Body)
	require.JSONEq(t, `{"node": null}`, string(res.Data), "%s", what)
}

func isoNotFound(t *testing.T, res *apptest.Response, what string) isoErr {
	t.Helper()
	require.Len(t, res.Errors, 1, "%s: %s", what, res.Body)
	require.Equal(t, "NOT_FOUND", res.Code(), "%s: %s", what, res.Body)
	return isoErr{res.Code(), res.Errors[0].Message}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	a := env.SignUp(t, "", "Tenant A")
	b := env.SignUp(t, "", "Tenant B")

	createKey := func(token, name string) (id, secret string) {
		res := env.Do(t, token, `mutation($n: String!) { createApiKey(input: {name: $n, role: ADMIN}) { secret apiKey { id } } }`, map[string]any{"n": name})
		var out struct {
			CreateAPIKey struct {
				Secret string
				APIKey struct{ ID string }
			} `json:"createApiKey"`
		}
		res.Decode(t, &out)
		return out.CreateAPIKey.APIKey.ID, out.CreateAPIKey.Secret
	}
	aKeyID, _ := createKey(a.AccessToken, "a-key")
	bKeyID, bSecret := createKey(b.AccessToken, "b-key")
	bKey2ID, _ := createKey(b.AccessToken, "b-key-2")

	typ, _ := isoDecodeID(t, a.UserID)
	require.Equal(t, "User", typ)
	typ, _ = isoDecodeID(t, a.TenantID)
	require.Equal(t, "Tenant", typ)
	typ, _ = isoDecodeID(t, aKeyID)
	require.Equal(t, "ApiKey", typ)

	const nodeQuery = `query($id: ID!) { node(id: $id) { id ... on User { email } ... on Tenant { name } ... on ApiKey { name prefix } } }`
	node := func(token, id string) *apptest.Response { return env.Do(t, token, nodeQuery, map[string]any{"id": id}) }
	const revoke = `mutation($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }`

	// Sanity: A sees its own objects through node, so NOT_FOUND below is isolation, not breakage.
	for _, id := range []string{a.UserID, a.TenantID, aKeyID} {
		res := node(a.AccessToken, id)
		var out struct{ Node struct{ ID string } }
		res.Decode(t, &out)
		require.Equal(t, id, out.Node.ID)
	}
	// ...and B sees B's.
	for _, id := range []string{b.UserID, b.TenantID, bKeyID} {
		res := node(b.AccessToken, id)
		require.Empty(t, res.Errors, "%s", res.Body)
	}

	// B's ids answer exactly like random ids of the same type: null, no error.
	for _, c := range []struct{ typ, bID string }{{"User", b.UserID}, {"Tenant", b.TenantID}, {"ApiKey", bKeyID}} {
		foreign := node(a.AccessToken, c.bID)
		requireNodeNull(t, foreign, "node(B's "+c.typ+")")
		requireNodeNull(t, node(a.AccessToken, isoGlobalID(c.typ, uuid.New())), "node(random "+c.typ+")")
		require.NotContains(t, string(foreign.Body), "Tenant B")
	}

	// revokeApiKey of B's key is NOT_FOUND like a missing key, and B's key keeps working.
	foreign := isoNotFound(t, env.Do(t, a.AccessToken, revoke, map[string]any{"id": bKeyID}), "revokeApiKey(B's key)")
	missing := isoNotFound(t, env.Do(t, a.AccessToken, revoke, map[string]any{"id": isoGlobalID("ApiKey", uuid.New())}), "revokeApiKey(random)")
	require.Equal(t, missing, foreign)
	require.Equal(t, "ADMIN", sessRole(t, env, bSecret), "B's key stopped working after A tried to revoke it")
	var bList struct {
		APIKeys []struct {
			ID        string
			RevokedAt *string
		} `json:"apiKeys"`
	}
	env.Do(t, b.AccessToken, `{ apiKeys { id revokedAt } }`, nil).Decode(t, &bList)
	require.Len(t, bList.APIKeys, 2)
	for _, k := range bList.APIKeys {
		require.Nil(t, k.RevokedAt, "B's key %s was revoked by A", k.ID)
	}

	// logIn into B's tenant with A's (correct) credentials: NOT_FOUND like a random tenant.
	foreign = isoNotFound(t, sessLogIn(t, env, a.Email, a.Password, b.TenantID), "logIn(B's tenant)")
	missing = isoNotFound(t, sessLogIn(t, env, a.Email, a.Password, isoGlobalID("Tenant", uuid.New())), "logIn(random tenant)")
	require.Equal(t, missing, foreign)

	// Malformed ids are NOT_FOUND everywhere.
	_, bUser := isoDecodeID(t, b.UserID)
	malformed := []string{
		"",
		"not base64 !!",
		base64.RawURLEncoding.EncodeToString([]byte("User:not-a-uuid")),
		base64.RawURLEncoding.EncodeToString([]byte("Nope:" + uuid.NewString())),
		base64.RawURLEncoding.EncodeToString([]byte(uuid.NewString())),
		bUser.String(),             // a bare uuid, not a global id
		b.UserID + "=",             // padding
		isoGlobalID("User", bUser), // right uuid, wrong type for revokeApiKey and logIn
	}
	for _, id := range malformed {
		if id != isoGlobalID("User", bUser) {
			requireNodeNull(t, node(a.AccessToken, id), "node("+id+")")
		}
		isoNotFound(t, env.Do(t, a.AccessToken, revoke, map[string]any{"id": id}), "revokeApiKey("+id+")")
		if id != "" {
			isoNotFound(t, sessLogIn(t, env, a.Email, a.Password, id), "logIn(tenantId "+id+")")
		}
	}
	// A type confusion does not reach B's objects either: B's key id read as a tenant.
	_, bKeyUUID := isoDecodeID(t, bKey2ID)
	requireNodeNull(t, node(a.AccessToken, isoGlobalID("Tenant", bKeyUUID)), "node(Tenant with B's key uuid)")
	_, bTenantUUID := isoDecodeID(t, b.TenantID)
	requireNodeNull(t, node(a.AccessToken, isoGlobalID("User", bTenantUUID)), "node(User with B's tenant uuid)")

	// A's key list is A's alone.
	var aList struct {
		APIKeys []struct{ ID, Name string } `json:"apiKeys"`
	}
	env.Do(t, a.AccessToken, `{ apiKeys { id name } }`, nil).Decode(t, &aList)
	require.Len(t, aList.APIKeys, 1)
	require.Equal(t, aKeyID, aList.APIKeys[0].ID)
	for _, k := range aList.APIKeys {
		require.NotEqual(t, bKeyID, k.ID)
		require.NotEqual(t, bKey2ID, k.ID)
	}
}
