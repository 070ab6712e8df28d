package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
)

// DefaultAccessTokenTTL is the lifetime of an access token unless configured otherwise.
const DefaultAccessTokenTTL = 15 * time.Minute

// Claims are the claims of an access token: the user (sub), tenant, role and whether the user
// is a platform admin.
type Claims struct {
	jwt.RegisteredClaims
	TenantID      string `json:"tid"`
	Role          Role   `json:"role"`
	PlatformAdmin bool   `json:"padm,omitempty"`
	// SessionID is the session (refresh-token family) that issued the token.
	SessionID string `json:"sid,omitempty"`
}

// Tokens issues and verifies access tokens. The algorithm is pinned to EdDSA; iss, aud and exp
// are required.
type Tokens struct {
	keys     *Keys
	issuer   string
	audience string
	ttl      time.Duration
	now      func() time.Time
	parser   *jwt.Parser

	// verified holds tokens that passed Verify, until they expire: checking an Ed25519
	// signature costs a tenth of a millisecond of CPU, and a client sends the same token with
	// every request for its lifetime.
	mu       sync.Mutex
	verified map[string]verifiedToken
}

// verifiedToken is what a verified token stands for.
type verifiedToken struct {
	actor Actor
	exp   time.Time
	kid   string
}

// maxVerified bounds the verified tokens remembered (a cache, not a registry: it starts afresh
// when full).
const maxVerified = 10_000

// tokenLeeway is the clock skew allowed on a token's times.
const tokenLeeway = 5 * time.Second

// NewTokens returns a token service over keys issuing tokens valid for ttl (0: the default).
// now may be nil (time.Now).
func NewTokens(keys *Keys, issuer, audience string, ttl time.Duration, now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	if ttl <= 0 {
		ttl = DefaultAccessTokenTTL
	}
	return &Tokens{
		keys: keys, issuer: issuer, audience: audience, ttl: ttl, now: now, verified: map[string]verifiedToken{},
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(issuer),
			jwt.WithAudience(audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithTimeFunc(now),
			jwt.WithLeeway(tokenLeeway),
		),
	}
}

// Issue signs an access token for a and returns it with its expiry.
func (t *Tokens) Issue(ctx context.Context, a Actor) (string, time.Time, error) {
	kid, key, err := t.keys.signer(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	now := t.now()
	exp := now.Add(t.ttl)
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    t.issuer,
			Subject:   a.UserID.String(),
			Audience:  jwt.ClaimStrings{t.audience},
			ExpiresAt: jwt.NewNumericDate(exp),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        uuid.NewString(),
		},
		TenantID:      a.TenantID.String(),
		Role:          a.Role,
		PlatformAdmin: a.PlatformAdmin,
	}
	if a.SessionID != uuid.Nil {
		claims.SessionID = a.SessionID.String()
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign access token: %w", err)
	}
	return s, exp, nil
}

// Verify checks an access token and returns its actor and expiry. Every failure is
// UNAUTHENTICATED. A token verified before is taken at its word until it expires, as long as
// the key that signed it is still known.
func (t *Tokens) Verify(ctx context.Context, token string) (Actor, time.Time, error) {
	t.mu.Lock()
	v, hit := t.verified[token]
	t.mu.Unlock()
	if hit && t.now().Before(v.exp.Add(tokenLeeway)) {
		if _, ok := t.keys.publicKey(ctx, v.kid); ok {
			return v.actor, v.exp, nil
		}
	}
	var claims Claims
	var kid string
	_, err := t.parser.ParseWithClaims(token, &claims, func(tok *jwt.Token) (any, error) {
		kid, _ = tok.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("token has no kid")
		}
		pub, ok := t.keys.publicKey(ctx, kid)
		if !ok {
			return nil, errors.New("unknown kid")
		}
		return pub, nil
	})
	if err != nil {
		return Actor{}, time.Time{}, &apperr.Error{Code: apperr.Unauthenticated, Message: "invalid or expired access token", Err: err}
	}
	userID, err1 := uuid.Parse(claims.Subject)
	tenantID, err2 := uuid.Parse(claims.TenantID)
	if err1 != nil || err2 != nil || !claims.Role.Valid() {
		return Actor{}, time.Time{}, apperr.New(apperr.Unauthenticated, "invalid access token claims")
	}
	a := Actor{UserID: userID, TenantID: tenantID, Role: claims.Role, PlatformAdmin: claims.PlatformAdmin}
	if claims.SessionID != "" {
		if a.SessionID, err = uuid.Parse(claims.SessionID); err != nil {
			return Actor{}, time.Time{}, apperr.New(apperr.Unauthenticated, "invalid access token claims")
		}
	}
	t.mu.Lock()
	if len(t.verified) >= maxVerified {
		t.verified = map[string]verifiedToken{}
	}
	t.verified[token] = verifiedToken{actor: a, exp: claims.ExpiresAt.Time, kid: kid}
	t.mu.Unlock()
	return a, claims.ExpiresAt.Time, nil
}
