package graph_test

import (
	"encoding/json"
	"fmt"
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
