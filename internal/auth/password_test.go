package auth

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var phcArgon2id = regexp.MustCompile(`^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$`)

func TestPasswordHashVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := NewPasswords(2)

	const pw = "correct horse battery staple"
	enc, err := p.Hash(ctx, pw)
	require.NoError(t, err)
	m := phcArgon2id.FindStringSubmatch(enc)
	require.NotNil(t, m, "not a PHC argon2id string: %q", enc)
	require.Equal(t, []string{"19456", "2", "1"}, m[1:4], "argon2id parameters")
	require.NotContains(t, enc, pw)

	ok, err := p.Verify(ctx, pw, enc)
	require.NoError(t, err)
	require.True(t, ok, "round trip")

	for _, wrong := range []string{"", "correct horse battery stapl", "Correct horse battery staple", pw + " "} {
		ok, err = p.Verify(ctx, wrong, enc)
		require.NoError(t, err)
		require.False(t, ok, "wrong password %q verified", wrong)
	}

	// A fresh salt each time.
	enc2, err := p.Hash(ctx, pw)
	require.NoError(t, err)
	require.NotEqual(t, enc, enc2)
	require.NotEqual(t, m[4], phcArgon2id.FindStringSubmatch(enc2)[4], "salt reused")
	ok, err = p.Verify(ctx, pw, enc2)
	require.NoError(t, err)
	require.True(t, ok)

	// A malformed hash is an error, never a match.
	ok, err = p.Verify(ctx, pw, strings.Replace(enc, "argon2id", "argon2i", 1))
	require.Error(t, err)
	require.False(t, ok)
}

func TestPasswordVerifyEmptyEncoded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := NewPasswords(1)
	// No stored hash (unknown user, invited user): false without error, whatever the password —
	// including the dummy hash's own password.
	for _, pw := range []string{"", "anything at all", "agentry-dummy"} {
		ok, err := p.Verify(ctx, pw, "")
		require.NoError(t, err)
		require.False(t, ok, "password %q verified against no hash", pw)
	}
	// The dummy path does the same work as a real verification.
	require.Regexp(t, phcArgon2id, p.dummy)
	require.Contains(t, p.dummy, "m=19456,t=2,p=1")
}

func TestPasswordConcurrencyCap(t *testing.T) {
	t.Parallel()
	p := NewPasswords(1)
	require.Equal(t, 1, cap(p.sem))
	require.Equal(t, 1, cap(NewPasswords(0).sem), "concurrency below 1 must mean 1")

	enc, err := p.Hash(context.Background(), "a password")
	require.NoError(t, err)

	// Another hash holds the only slot (which the first Hash must have given back).
	select {
	case p.sem <- struct{}{}:
	default:
		t.Fatal("Hash kept the slot")
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	// noHang fails the test instead of hanging it when a call waits for the slot regardless of
	// its context.
	noHang := func(name string, f func() (bool, error)) (bool, error) {
		t.Helper()
		type result struct {
			ok  bool
			err error
		}
		done := make(chan result, 1)
		go func() {
			ok, err := f()
			done <- result{ok, err}
		}()
		select {
		case r := <-done:
			return r.ok, r.err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s with a cancelled context waited for the busy slot", name)
			return false, nil
		}
	}
	_, err = noHang("Hash", func() (bool, error) { _, err := p.Hash(cancelled, "a password"); return false, err })
	require.ErrorIs(t, err, context.Canceled)
	ok, err := noHang("Verify", func() (bool, error) { return p.Verify(cancelled, "a password", enc) })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ok)
	ok, err = noHang("Verify (no hash)", func() (bool, error) { return p.Verify(cancelled, "a password", "") })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ok)
	require.Len(t, p.sem, 1, "a cancelled caller took or released a slot")

	// Once the slot is free, work proceeds and gives the slot back.
	<-p.sem
	live, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	ok, err = p.Verify(live, "a password", enc)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, p.sem, "Verify kept the slot")
	_, err = p.Hash(live, "another")
	require.NoError(t, err)
	require.Empty(t, p.sem, "Hash kept the slot")
}
