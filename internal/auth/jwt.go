package auth

import (
	"context"
	"errors"
	"fmt"
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
}

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
		keys: keys, issuer: issuer, audience: audience, ttl: ttl, now: now,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(issuer),
			jwt.WithAudience(audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithTimeFunc(now),
			jwt.WithLeeway(5*time.Second),
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
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign access token: %w", err)
	}
	return s, exp, nil
}

// Verify checks an access token and returns its actor and expiry. Every failure is
// UNAUTHENTICATED.
func (t *Tokens) Verify(ctx context.Context, token string) (Actor, time.Time, error) {
	var claims Claims
	_, err := t.parser.ParseWithClaims(token, &claims, func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
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
	return Actor{UserID: userID, TenantID: tenantID, Role: claims.Role, PlatformAdmin: claims.PlatformAdmin}, claims.ExpiresAt.Time, nil
}
