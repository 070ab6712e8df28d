// Package model holds the GraphQL edge's types: the hand-written ones below (bound by gqlgen's
// autobind) and the generated ones in models_gen.go.
package model

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// EncodeID returns the opaque global id of an object: base64url("Type:uuid").
func EncodeID(typ string, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + id.String()))
}

// DecodeID parses a global id. Any id that is malformed or names another type is NOT_FOUND,
// like a missing object.
func DecodeID(want, id string) (uuid.UUID, error) {
	typ, u, err := ParseID(id)
	if err != nil || typ != want {
		return uuid.Nil, apperr.NotFoundf(strings.ToLower(want))
	}
	return u, nil
}

// ParseID splits a global id into its type and uuid.
func ParseID(id string) (string, uuid.UUID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return "", uuid.Nil, errors.New("malformed id")
	}
	typ, rest, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", uuid.Nil, errors.New("malformed id")
	}
	u, err := uuid.Parse(rest)
	if err != nil {
		return "", uuid.Nil, errors.New("malformed id")
	}
	return typ, u, nil
}

// User is a user; Row is nil until loaded (fields other than id resolve through a loader).
type User struct {
	UserID uuid.UUID
	Row    *dbsqlc.User
}

// ID is the global id.
func (u *User) ID() string { return EncodeID("User", u.UserID) }

// IsNode marks User as a Node.
func (*User) IsNode() {}

// GetID implements Node.
func (u *User) GetID() string { return u.ID() }

// Tenant is a tenant; Row is nil until loaded.
type Tenant struct {
	TenantID uuid.UUID
	Row      *dbsqlc.Tenant
}

// ID is the global id.
func (t *Tenant) ID() string { return EncodeID("Tenant", t.TenantID) }

// IsNode marks Tenant as a Node.
func (*Tenant) IsNode() {}

// GetID implements Node.
func (t *Tenant) GetID() string { return t.ID() }

// APIKey is an API key (never its secret).
type APIKey struct{ Row dbsqlc.ApiKey }

// ID is the global id.
func (k *APIKey) ID() string { return EncodeID("ApiKey", k.Row.ID) }

// Name of the key.
func (k *APIKey) Name() string { return k.Row.Name }

// Prefix is the visible start of the key.
func (k *APIKey) Prefix() string { return k.Row.Prefix }

// Role the key acts with.
func (k *APIKey) Role() Role { return Role(k.Row.Role) }

// CreatedAt is when the key was made.
func (k *APIKey) CreatedAt() time.Time { return k.Row.CreatedAt }

// RevokedAt is when the key was revoked, nil while it is valid.
func (k *APIKey) RevokedAt() *time.Time { return k.Row.RevokedAt }

// IsNode marks APIKey as a Node.
func (*APIKey) IsNode() {}

// GetID implements Node.
func (k *APIKey) GetID() string { return k.ID() }

// JSON is an arbitrary JSON value, passed through verbatim.
type JSON json.RawMessage

// MarshalGQL writes the value.
func (j JSON) MarshalGQL(w io.Writer) {
	if len(j) == 0 {
		_, _ = io.WriteString(w, "null")
		return
	}
	_, _ = w.Write(j)
}

// UnmarshalGQL accepts any JSON value.
func (j *JSON) UnmarshalGQL(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	*j = b
	return nil
}

var _ graphql.Marshaler = JSON(nil)
