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

// approvalConnection pages approvals by id (n of rows, one more telling of a next page).
func approvalConnection(rows []dbsqlc.Approval, n int) *model.ApprovalConnection {
	conn := &model.ApprovalConnection{Edges: []*model.ApprovalEdge{}, PageInfo: &model.PageInfo{HasNextPage: len(rows) > n}}
	for i := range rows[:min(n, len(rows))] {
		c := model.EncodeCursor("a", rows[i].ID.String())
		conn.Edges = append(conn.Edges, &model.ApprovalEdge{Cursor: c, Node: &model.Approval{Row: rows[i]}})
		conn.PageInfo.EndCursor = &c
	}
	return conn
}
