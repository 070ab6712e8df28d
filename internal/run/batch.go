package run

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// ByIDs returns the caller's tenant's runs among ids (others are absent from the map), as Get
// does for one: a batch for the GraphQL edge's loaders.
func (s *Service) ByIDs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]dbsqlc.Run, len(ids))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.RunListByIDs(ctx, dbsqlc.RunListByIDsParams{TenantID: a.TenantID, Ids: ids})
		for _, r := range rows {
			out[r.ID] = r
		}
		return err
	})
	return out, err
}

// ToolCallsByRuns returns the tool calls of the caller's tenant's runs among runIDs, each run's
// in the order they were made, as ToolCalls does for one run.
func (s *Service) ToolCallsByRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID][]dbsqlc.ToolCall, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID][]dbsqlc.ToolCall, len(runIDs))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.ToolCallListByRuns(ctx, dbsqlc.ToolCallListByRunsParams{TenantID: a.TenantID, RunIds: runIDs})
		for _, r := range rows {
			out[r.RunID] = append(out[r.RunID], r)
		}
		return err
	})
	return out, err
}
