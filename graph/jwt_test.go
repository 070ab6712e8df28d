package graph_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// jwtSegment decodes one base64url segment of a compact JWT into a JSON object.
func jwtSegment(t *testing.T, token string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "not a compact JWT: %q", token)
	raw, err := base64.RawURLEncoding.DecodeString(parts[i])
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// jwtSign signs claims with method and key, putting kid (when not empty) in the header.
func jwtSign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// jwtServerKey reads the signing key kid from the database and unseals its private half with the
// master key the way internal/auth/keys.go seals it (AES-256-GCM, nonce prefix, AD = kid).
func jwtServerKey(t *testing.T, ownerURL string, masterKey []byte, kid string) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pub, sealed []byte
	require.NoError(t, conn.QueryRow(ctx, `SELECT public_key, private_key_enc FROM signing_keys WHERE kid = $1`, kid).Scan(&pub, &sealed))
	require.Len(t, pub, ed25519.PublicKeySize)
	block, err := aes.NewCipher(masterKey)
	require.NoError(t, err)
	gcm, err := cipher.NewGCM(block)
	require.NoError(t, err)
	require.Greater(t, len(sealed), gcm.NonceSize())
	seed, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], []byte(kid))
	require.NoError(t, err, "unseal the signing key with the test's master key")
	priv := ed25519.NewKeyFromSeed(seed)
	require.Equal(t, ed25519.PublicKey(pub), priv.Public(), "the unsealed key does not match the stored public key")
	return ed25519.PublicKey(pub), priv
}

// jwtTamper replaces the payload of a signed token, keeping its header and signature.
func jwtTamper(t *testing.T, token string, edit func(claims map[string]any)) string {
	t.Helper()
	parts := strings.Split(token, ".")
	claims := jwtSegment(t, token, 1)
	edit(claims)
	raw, err := json.Marshal(claims)
	require.NoError(t, err)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
}

func requireUnauthenticated401(t *testing.T, res *apptest.Response, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, http.StatusUnauthorized, res.Status, "%v: %s", msgAndArgs, res.Body)
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%v: %s", msgAndArgs, res.Body)
	require.True(t, len(res.Data) == 0 || string(res.Data) == "null", "%v: data leaked: %s", msgAndArgs, res.Data)
}

func TestJWTMatrix(t *testing.T) {
	t.Parallel()
	masterKey := make([]byte, 32)
	_, _ = rand.Read(masterKey)
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(masterKey),
	}})
	s := env.SignUp(t, "", "")
	const query = `{ viewer { role } }`

	// The server's own token works, and names the key it was signed with.
	res := env.Do(t, s.AccessToken, query, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	header := jwtSegment(t, s.AccessToken, 0)
	require.Equal(t, "EdDSA", header["alg"])
	kid, _ := header["kid"].(string)
	require.NotEmpty(t, kid, "access token without kid")
	pub, priv := jwtServerKey(t, env.OwnerURL, masterKey, kid)

	// base is a valid claims set like the server's (iss, aud, sub, tid, role, exp, nbf, iat).
	issued := jwtSegment(t, s.AccessToken, 1)
	require.Equal(t, "agentry", issued["iss"])
	base := func() jwt.MapClaims {
		now := time.Now()
		c := jwt.MapClaims{}
		maps.Copy(c, issued)
		c["iss"] = "agentry"
		c["aud"] = []string{"agentry-api"}
		c["exp"] = now.Add(10 * time.Minute).Unix()
		c["nbf"] = now.Unix()
		c["iat"] = now.Unix()
		return c
	}
	with := func(edit func(c jwt.MapClaims)) jwt.MapClaims {
		c := base()
		edit(c)
		return c
	}

	// Sanity: a token the test signs with the real key passes, so the failures below are caused
	// by the one thing each case changes, not by the test's signing. The role claim does not
	// decide: the role is the user's current membership's (OWNER).
	for _, role := range []string{"OWNER", "VIEWER"} {
		tok := jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["role"] = role }))
		res := env.Do(t, tok, query, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var out struct{ Viewer struct{ Role string } }
		res.Decode(t, &out)
		require.Equal(t, "OWNER", out.Viewer.Role, "claimed role %s", role)
	}
	validViewer := jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["role"] = "VIEWER" }))

	_, otherPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	cases := []struct {
		name  string
		token string
	}{
		{"alg none", jwtSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid, base())},
		{"alg none without signature segment", strings.TrimSuffix(jwtSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid, base()), ".")},
		{"HS256 with the public key as secret", jwtSign(t, jwt.SigningMethodHS256, []byte(pub), kid, base())},
		{"expired", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) {
			c["exp"] = now.Add(-time.Minute).Unix()
			c["nbf"] = now.Add(-20 * time.Minute).Unix()
			c["iat"] = now.Add(-20 * time.Minute).Unix()
		}))},
		{"nbf in the future", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(2 * time.Minute).Unix() }))},
		{"iat in the future", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["iat"] = now.Add(2 * time.Minute).Unix() }))},
		{"no session (sid)", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { delete(c, "sid") }))},
		{"a session that does not exist", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["sid"] = uuid.NewString() }))},
		{"a session id that is no uuid", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["sid"] = "x" }))},
		{"wrong iss", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["iss"] = "not-agentry" }))},
		{"missing iss", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { delete(c, "iss") }))},
		{"wrong aud", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["aud"] = []string{"other-api"} }))},
		{"missing aud", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { delete(c, "aud") }))},
		{"missing exp", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"unknown kid", jwtSign(t, jwt.SigningMethodEdDSA, priv, "no-such-kid", base())},
		{"no kid", jwtSign(t, jwt.SigningMethodEdDSA, priv, "", base())},
		{"real kid, another Ed25519 key", jwtSign(t, jwt.SigningMethodEdDSA, otherPriv, kid, base())},
		{"tampered role of the server's token", jwtTamper(t, s.AccessToken, func(c map[string]any) { c["role"] = "ADMIN" })},
		{"tampered role VIEWER to OWNER", jwtTamper(t, validViewer, func(c map[string]any) { c["role"] = "OWNER" })},
		{"invalid role claim", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["role"] = "GOD" }))},
		{"sub not a uuid", jwtSign(t, jwt.SigningMethodEdDSA, priv, kid, with(func(c jwt.MapClaims) { c["sub"] = "admin" }))},
		{"garbage", "not.a.jwt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireUnauthenticated401(t, env.Do(t, tc.token, query, nil), tc.name)
		})
	}

	// An Authorization header that is not "Bearer <credential>" is refused, even with a valid
	// token after another scheme.
	for _, h := range []string{"Basic dXNlcjpwYXNzd29yZA==", "Token " + s.AccessToken, s.AccessToken, "Bearer", "Bearer  ", "BearerX " + s.AccessToken} {
		req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { role } }"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", h)
		requireUnauthenticated401(t, env.Raw(t, req), "Authorization: "+h)
	}
}
