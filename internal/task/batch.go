package task

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// ByIDs returns the caller's tenant's tasks among ids (others are absent from the map), as Get
// does for one: a batch for the GraphQL edge's loaders.
func (s *Service) ByIDs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]dbsqlc.Task, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]dbsqlc.Task, len(ids))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.TaskListByIDs(ctx, dbsqlc.TaskListByIDsParams{TenantID: a.TenantID, Ids: ids})
		for _, r := range rows {
			out[r.ID] = r
		}
		return err
	})
	return out, err
}
