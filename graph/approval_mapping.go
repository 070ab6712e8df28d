package graph

import (
	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// approvals maps approval rows onto the edge's type.
func approvals(rows []dbsqlc.Approval) []*model.Approval {
	out := make([]*model.Approval, len(rows))
	for i := range rows {
		out[i] = &model.Approval{Row: rows[i]}
	}
	return out
}
