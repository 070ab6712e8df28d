package chat

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// ConversationsByIDs returns the caller's tenant's conversations among ids (others are absent
// from the map), as Conversation does for one: a batch for the GraphQL edge's loaders.
func (s *Service) ConversationsByIDs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]dbsqlc.Conversation, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]dbsqlc.Conversation, len(ids))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.ConversationListByIDs(ctx, dbsqlc.ConversationListByIDsParams{TenantID: a.TenantID, Ids: ids})
		for _, r := range rows {
			out[r.ID] = r
		}
		return err
	})
	return out, err
}
