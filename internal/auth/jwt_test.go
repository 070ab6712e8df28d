package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// A verified token is remembered, but only as what it is: until its expiry, byte for byte, and
// while its key is known.
func TestVerifyRemembersTokensUntilTheyExpire(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	keys, err := NewKeys(ctx, d, bytes.Repeat([]byte{7}, 32), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	now := time.Now()
	tokens := NewTokens(keys, "agentry-test", "agentry-test", time.Minute, func() time.Time { return now })
	a := Actor{UserID: uuid.New(), TenantID: uuid.New(), Role: RoleMember}
	token, exp, err := tokens.Issue(ctx, a)
	require.NoError(t, err)
	exp = exp.Truncate(time.Second) // what the token carries (NumericDate)

	for range 2 { // verified, then remembered
		got, gotExp, err := tokens.Verify(ctx, token)
		require.NoError(t, err)
		require.Equal(t, a, got)
		require.True(t, exp.Equal(gotExp))
	}

	// The same claims with another signature are not the remembered token.
	sig := token[len(token)-4:]
	forged := token[:len(token)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[sig != "AAAA"]
	_, _, err = tokens.Verify(ctx, forged)
	require.Equal(t, apperr.Unauthenticated, apperr.CodeOf(err))

	// Within the leeway it still holds; past it, a remembered token is refused like any other.
	now = exp.Add(tokenLeeway - time.Second)
	_, _, err = tokens.Verify(ctx, token)
	require.NoError(t, err)
	now = exp.Add(tokenLeeway + time.Second)
	_, _, err = tokens.Verify(ctx, token)
	require.Equal(t, apperr.Unauthenticated, apperr.CodeOf(err))

	// A token whose key this process no longer knows is refused too.
	now = time.Now()
	token, _, err = tokens.Issue(ctx, a)
	require.NoError(t, err)
	_, _, err = tokens.Verify(ctx, token)
	require.NoError(t, err)
	keys.mu.Lock()
	keys.public = map[string]ed25519.PublicKey{}
	keys.lastRefresh = time.Now()
	keys.mu.Unlock()
	_, _, err = tokens.Verify(ctx, token)
	require.Equal(t, apperr.Unauthenticated, apperr.CodeOf(err))
}
