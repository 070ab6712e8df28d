package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"strings"
)

// Prefixes of the opaque credentials agentry hands out. They make leaked secrets easy to find
// with secret scanners.
const (
	apiKeyPrefix       = "agk_"
	refreshTokenPrefix = "agr_"
	apiKeyIDLen        = 12 // characters of lowercase base32 after apiKeyPrefix; shown to users as the key's prefix
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on supported platforms (Go 1.24+)
	}
	return b
}

// newAPIKey returns a fresh secret "agk_<id>_<secret>" and its visible prefix "agk_<id>".
func newAPIKey() (secret, prefix string) {
	id := lowerBase32.EncodeToString(randomBytes(10))[:apiKeyIDLen]
	prefix = apiKeyPrefix + id
	return prefix + "_" + base64.RawURLEncoding.EncodeToString(randomBytes(32)), prefix
}

// splitAPIKey returns the prefix of a well-formed API key secret.
func splitAPIKey(secret string) (prefix string, ok bool) {
	if !strings.HasPrefix(secret, apiKeyPrefix) || len(secret) < len(apiKeyPrefix)+apiKeyIDLen+2 {
		return "", false
	}
	prefix = secret[:len(apiKeyPrefix)+apiKeyIDLen]
	return prefix, secret[len(prefix)] == '_'
}

func newRefreshToken() string {
	return refreshTokenPrefix + base64.RawURLEncoding.EncodeToString(randomBytes(32))
}

// hashSecret hashes a high-entropy secret for storage. SHA-256 suffices for 256-bit random
// secrets (no dictionary to attack); passwords use argon2id instead.
func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func equalHash(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
