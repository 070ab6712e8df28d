// Package loader batches the GraphQL edge's lookups per request (dataloaders), so that a list of
// objects costs one query per kind of related object, not one per object.
package loader

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/vikstrous/dataloadgen"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/tenancy"
)

// Loaders are one request's dataloaders.
type Loaders struct {
	user *dataloadgen.Loader[uuid.UUID, dbsqlc.User]
}

type key struct{}

// New returns fresh loaders backed by the services.
func New(ten *tenancy.Service) *Loaders {
	return &Loaders{
		user: dataloadgen.NewMappedLoader(ten.UsersByIDs, dataloadgen.WithWait(500*time.Microsecond)),
	}
}

// User loads a user of the caller's tenant; any other is NOT_FOUND.
func (l *Loaders) User(ctx context.Context, id uuid.UUID) (dbsqlc.User, error) {
	u, err := l.user.Load(ctx, id)
	if errors.Is(err, dataloadgen.ErrNotFound) {
		return u, apperr.NotFoundf("user")
	}
	return u, err
}

// With returns ctx carrying l.
func With(ctx context.Context, l *Loaders) context.Context { return context.WithValue(ctx, key{}, l) }

// From returns the request's loaders.
func From(ctx context.Context) *Loaders {
	l, _ := ctx.Value(key{}).(*Loaders)
	return l
}
