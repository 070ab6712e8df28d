// Package auth establishes who is calling: password hashing (argon2id), access tokens (EdDSA
// JWTs), rotating refresh tokens, API keys, and the Actor carried in the request context.
package auth

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
)

// Role is a member's role in a tenant. Roles are ordered: OWNER > ADMIN > MEMBER > VIEWER.
type Role string

// The tenant roles.
const (
	RoleOwner  Role = "OWNER"
	RoleAdmin  Role = "ADMIN"
	RoleMember Role = "MEMBER"
	RoleViewer Role = "VIEWER"
)

func (r Role) rank() int {
	switch r {
	case RoleOwner:
		return 4
	case RoleAdmin:
		return 3
	case RoleMember:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// AtLeast reports whether r grants everything min grants.
func (r Role) AtLeast(min Role) bool { return r.rank() >= min.rank() && r.Valid() }

// ParseRole validates a role name.
func ParseRole(field, s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", apperr.Invalid(field, "must be one of OWNER, ADMIN, MEMBER, VIEWER")
	}
	return r, nil
}

// Actor is the authenticated caller of a request or the owner of a job. The zero value is no
// one.
type Actor struct {
	UserID        uuid.UUID
	TenantID      uuid.UUID
	Role          Role
	PlatformAdmin bool
	// APIKeyID is set when the caller authenticated with an API key.
	APIKeyID uuid.UUID
	// SessionID is the session (refresh-token family) an access token belongs to: logging out
	// ends it, and with it every access token it issued. Nil for API keys and jobs.
	SessionID uuid.UUID
}

type actorKey struct{}

// WithActor returns ctx carrying a. Its transactions (db.InTx) act for a's user: row-level
// security admits only what that user may see inside the tenant.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(db.WithUser(ctx, a.UserID), actorKey{}, a)
}

// ActorFrom returns the actor in ctx, if any.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok && a.UserID != uuid.Nil
}

// Require returns the actor in ctx when it holds at least min, UNAUTHENTICATED when there is no
// actor and FORBIDDEN when its role is too low.
func Require(ctx context.Context, min Role) (Actor, error) {
	a, ok := ActorFrom(ctx)
	if !ok {
		return Actor{}, apperr.New(apperr.Unauthenticated, "authentication required")
	}
	if !a.Role.AtLeast(min) {
		return Actor{}, apperr.New(apperr.Forbidden, "this operation needs the %s role or higher", min)
	}
	return a, nil
}

// BearerToken extracts the credential of an Authorization value "Bearer <token>" (the scheme is
// case-insensitive, as HTTP auth schemes are).
func BearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
