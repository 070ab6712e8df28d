package approval

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// ListByRuns returns the approvals of the caller's tenant's runs among runIDs, each run's oldest
// first, as ListByRun does for one run: a batch for the GraphQL edge's loaders.
func (s *Service) ListByRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID][]dbsqlc.Approval, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID][]dbsqlc.Approval, len(runIDs))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.ApprovalListByRuns(ctx, dbsqlc.ApprovalListByRunsParams{TenantID: a.TenantID, RunIds: runIDs})
		for _, r := range rows {
			out[r.RunID] = append(out[r.RunID], r)
		}
		return err
	})
	return out, err
}
