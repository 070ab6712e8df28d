package graph_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

const enumSignUp = `mutation($in: SignUpInput!) { signUp(input: $in) {
	accessToken refreshToken expiresAt
	viewer { user { id email name } tenant { id name } role platformAdmin } } }`

// shapeOf replaces every leaf of a decoded JSON value by its kind (a string by how many
// dot-separated parts it has), keeping the structure.
func shapeOf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shapeOf(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = shapeOf(e)
		}
		return out
	case string:
		return fmt.Sprintf("string(%d parts)", len(strings.Split(x, ".")))
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// TestSignUpDoesNotTellTakenAddresses performs account enumeration through signUp: an
// attacker signs up with an address that has an account and with one that has none. Both
// answers have the same HTTP status, no error, and the same shape (tokens of the same form,
// the given address and tenant name, OWNER); each sends exactly one email, as the structural
// sign of the same work: a verification link to the new address, and to the holder of the
// taken one a note that someone tried to sign up. The taken account is unchanged: its password
// still logs in, the attacker's does not, it gains no tenant, and the attacker's tokens open
// nothing.
func TestSignUpDoesNotTellTakenAddresses(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	holder := env.SignUp(t, "", "Holder's tenant")
	fresh := fmt.Sprintf("fresh-%d@example.com", time.Now().UnixNano())

	signUp := func(email string) (*apptest.Response, any) {
		res := env.Do(t, "", enumSignUp, map[string]any{"in": map[string]any{
			"email": email, "password": "the attacker's passphrase", "name": "Mallory", "tenantName": "Probe",
		}})
		var data any
		require.NoError(t, json.Unmarshal(res.Data, &data), "%s", res.Body)
		return res, data
	}
	takenRes, taken := signUp(strings.ToUpper(holder.Email[:1]) + holder.Email[1:])
	freshRes, created := signUp(fresh)

	require.Empty(t, freshRes.Errors, "%s", freshRes.Body)
	require.Empty(t, takenRes.Errors, "a taken address is told apart: %s", takenRes.Body)
	require.Equal(t, freshRes.Status, takenRes.Status)
	require.Equal(t, shapeOf(created), shapeOf(taken), "the answers differ in shape:\n%s\n%s", freshRes.Body, takenRes.Body)
	var out struct {
		SignUp struct {
			AccessToken, RefreshToken string
			Viewer                    struct {
				User   struct{ ID, Email, Name string }
				Tenant struct{ ID, Name string }
				Role   string
			}
		}
	}
	freshRes.Decode(t, &out)
	freshAccess, freshRefresh := out.SignUp.AccessToken, out.SignUp.RefreshToken
	takenRes.Decode(t, &out)
	require.Equal(t, strings.Split(freshAccess, ".")[0], strings.Split(out.SignUp.AccessToken, ".")[0], "the access tokens' headers differ")
	require.Equal(t, freshRefresh[:4], out.SignUp.RefreshToken[:4])
	require.Len(t, out.SignUp.RefreshToken, len(freshRefresh))
	require.Equal(t, strings.ToUpper(holder.Email[:1])+holder.Email[1:], out.SignUp.Viewer.User.Email)
	require.Equal(t, "Mallory", out.SignUp.Viewer.User.Name)
	require.Equal(t, "Probe", out.SignUp.Viewer.Tenant.Name)
	require.Equal(t, "OWNER", out.SignUp.Viewer.Role)
	require.NotEqual(t, holder.UserID, out.SignUp.Viewer.User.ID, "the answer names the holder's account")

	// One email each: the new address's verification link, the holder's note.
	_ = env.LinkToken(t, fresh, "Verify your email", 1)
	note, err := env.Mail.Wait(t.Context(), holder.Email, "Someone tried to sign up", 1)
	require.NoError(t, err)
	require.Contains(t, note.Text, "/login")
	require.Contains(t, note.Text, "/forgot-password")
	require.NotContains(t, note.Text, "token=", "the note carries a link that acts on the account")
	sent := env.Mail.Sent(holder.Email)
	require.Len(t, sent, 2, "the holder's own verification link and the note only")
	require.Contains(t, sent[0].Subject, "Verify your email")

	// Nothing changed.
	requireUnauthenticated401(t, env.Do(t, out.SignUp.AccessToken, sessViewerRole, nil), "the probe's access token")
	require.Equal(t, "UNAUTHENTICATED", sessRefresh(t, env, out.SignUp.RefreshToken).Code(), "the probe's refresh token")
	require.Equal(t, "UNAUTHENTICATED", sessLogIn(t, env, holder.Email, "the attacker's passphrase", "").Code(), "the attacker's password")
	sessDecodeAuth(t, sessLogIn(t, env, holder.Email, holder.Password, ""), "logIn")
	var ms struct {
		Viewer struct {
			User        struct{ Name *string }
			Memberships []struct{ Tenant struct{ Name string } }
		}
	}
	env.Do(t, holder.AccessToken, `{ viewer { user { name } memberships { tenant { name } } } }`, nil).Decode(t, &ms)
	require.Nil(t, ms.Viewer.User.Name, "the holder's name changed")
	require.Len(t, ms.Viewer.Memberships, 1)
	require.Equal(t, "Holder's tenant", ms.Viewer.Memberships[0].Tenant.Name)
}

// TestSignUpAnswersTakenAndFreeAlike continues the enumeration attack on the rest of the
// answer: the viewer's fields that are resolved for the request's own credential (memberships,
// emailVerified) answer the same for a taken address as for a free one, anonymous or with the
// attacker's own token, and so do the refusals of bad input (checked before the address is
// looked up); the access tokens carry the same claims.
func TestSignUpAnswersTakenAndFreeAlike(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	holder := env.SignUp(t, "", "Holder's tenant")
	attacker := env.SignUp(t, "", "Attacker's tenant")
	n := 0
	free := func() string {
		n++
		return fmt.Sprintf("free-%d-%d@example.com", n, time.Now().UnixNano())
	}
	const full = `mutation($in: SignUpInput!) { signUp(input: $in) {
		accessToken refreshToken expiresAt
		viewer { user { id email name } tenant { id name plan } role platformAdmin emailVerified memberships { role tenant { name } } } } }`
	signUp := func(token, query, email string, in map[string]any) *apptest.Response {
		vars := map[string]any{"email": email, "password": "the attacker's passphrase", "name": "Mallory", "tenantName": "Probe"}
		for k, v := range in {
			vars[k] = v
		}
		return env.Do(t, token, query, map[string]any{"in": vars})
	}
	// errorsOf keeps what a client sees of each error, by path (fields resolve concurrently,
	// so their errors come in any order).
	errorsOf := func(res *apptest.Response) []map[string]any {
		out := []map[string]any{}
		for _, e := range res.Errors {
			out = append(out, map[string]any{"message": e.Message, "path": e.Path, "extensions": e.Extensions})
		}
		sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]["path"]) < fmt.Sprint(out[j]["path"]) })
		return out
	}
	// answer is a response with its tokens and ids reduced to their shape and the address
	// replaced, so two sign-ups compare equal when a client cannot tell them apart.
	answer := func(res *apptest.Response, email string) (int, any, []map[string]any) {
		var data map[string]any
		require.NoError(t, json.Unmarshal(res.Data, &data), "%s", res.Body)
		if s, ok := data["signUp"].(map[string]any); ok {
			s["accessToken"], s["refreshToken"], s["expiresAt"] = shapeOf(s["accessToken"]), shapeOf(s["refreshToken"]), shapeOf(s["expiresAt"])
			v := s["viewer"].(map[string]any)
			u, tn := v["user"].(map[string]any), v["tenant"].(map[string]any)
			require.Equal(t, email, u["email"])
			u["id"], u["email"], tn["id"] = shapeOf(u["id"]), "the address given", shapeOf(tn["id"])
		}
		return res.Status, data, errorsOf(res)
	}
	same := func(what string, taken, fresh *apptest.Response, freshEmail string) {
		t.Helper()
		ts, td, te := answer(taken, holder.Email)
		fs, fd, fe := answer(fresh, freshEmail)
		require.Equal(t, fs, ts, "%s: HTTP status", what)
		require.Equal(t, fe, te, "%s: errors\n%s\n%s", what, fresh.Body, taken.Body)
		require.Equal(t, fd, td, "%s: data\n%s\n%s", what, fresh.Body, taken.Body)
	}

	// Anonymous: the per-credential fields fail alike (there is no credential).
	email := free()
	same("anonymous", signUp("", full, holder.Email, nil), signUp("", full, email, nil), email)

	// With the attacker's own token: those fields are the attacker's, alike.
	email = free()
	taken, fresh := signUp(attacker.AccessToken, full, holder.Email, nil), signUp(attacker.AccessToken, full, email, nil)
	require.Empty(t, fresh.Errors, "%s", fresh.Body)
	same("the attacker's token", taken, fresh, email)

	// The access tokens carry the same claims (their values: other ids, other times).
	claims := func(res *apptest.Response) []string {
		var out struct{ SignUp struct{ AccessToken string } }
		res.Decode(t, &out)
		part := strings.Split(out.SignUp.AccessToken, ".")[1]
		raw, err := base64.RawURLEncoding.DecodeString(part)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		keys := make([]string, 0, len(m))
		for k, v := range m {
			keys = append(keys, fmt.Sprintf("%s:%T", k, v))
		}
		sort.Strings(keys)
		return keys
	}
	require.Equal(t, claims(fresh), claims(taken), "the access tokens' claims differ")

	// Bad input is refused alike.
	for _, bad := range []map[string]any{
		{"password": "short"},
		{"password": strings.Repeat("p", 257)},
		{"tenantName": " "},
		{"name": strings.Repeat("n", 201)},
	} {
		email = free()
		taken, fresh = signUp("", enumSignUp, holder.Email, bad), signUp("", enumSignUp, email, bad)
		require.Equal(t, "BAD_USER_INPUT", fresh.Code(), "%v: %s", bad, fresh.Body)
		same(fmt.Sprintf("%v", bad), taken, fresh, email)
	}
}
