package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: OWASP's recommendation (m=19 MiB, t=2, p=1).
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Passwords hashes and verifies passwords with argon2id, at most a fixed number at a time: each
// hash takes 19 MiB and tens of milliseconds of a core, so unbounded concurrency would let a
// burst of logins exhaust the process.
type Passwords struct {
	sem chan struct{}
	// dummy is verified against when a user does not exist, so that a login for an unknown email
	// costs the same as one with a wrong password.
	dummy string
}

// NewPasswords returns a hasher allowing concurrency hashes at once (at least 1).
func NewPasswords(concurrency int) *Passwords {
	if concurrency < 1 {
		concurrency = 1
	}
	p := &Passwords{sem: make(chan struct{}, concurrency)}
	p.dummy = encodeArgon(make([]byte, argonSaltLen), argon2.IDKey([]byte("agentry-dummy"), make([]byte, argonSaltLen), argonTime, argonMemoryKiB, argonThreads, argonKeyLen), argonMemoryKiB, argonTime, argonThreads)
	return p
}

func (p *Passwords) acquire(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hash returns the PHC-format argon2id hash of password.
func (p *Passwords) Hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	if err := p.acquire(ctx); err != nil {
		return "", err
	}
	defer func() { <-p.sem }()
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return encodeArgon(salt, key, argonMemoryKiB, argonTime, argonThreads), nil
}

// Verify reports whether password matches encoded. An empty encoded (no such user, or an invited
// user without a password) verifies against a dummy hash and returns false.
func (p *Passwords) Verify(ctx context.Context, password, encoded string) (bool, error) {
	real := encoded != ""
	if !real {
		encoded = p.dummy
	}
	mem, t, threads, salt, want, err := decodeArgon(encoded)
	if err != nil {
		return false, err
	}
	if err := p.acquire(ctx); err != nil {
		return false, err
	}
	defer func() { <-p.sem }()
	got := argon2.IDKey([]byte(password), salt, t, mem, threads, uint32(len(want)))
	return real && subtle.ConstantTimeCompare(got, want) == 1, nil
}

func encodeArgon(salt, key []byte, mem, t uint32, threads uint8) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, mem, t, threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

func decodeArgon(s string) (mem, t uint32, threads uint8, salt, key []byte, err error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return 0, 0, 0, nil, nil, fmt.Errorf("password hash: not argon2id")
	}
	var version int
	if _, err = fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return 0, 0, 0, nil, nil, fmt.Errorf("password hash: unsupported version")
	}
	if _, err = fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &t, &threads); err != nil {
		return 0, 0, 0, nil, nil, fmt.Errorf("password hash: parameters: %w", err)
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil {
		return 0, 0, 0, nil, nil, fmt.Errorf("password hash: salt: %w", err)
	}
	if key, err = b64.DecodeString(parts[5]); err != nil {
		return 0, 0, 0, nil, nil, fmt.Errorf("password hash: key: %w", err)
	}
	return mem, t, threads, salt, key, nil
}
