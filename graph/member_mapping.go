package graph

import (
	"github.com/google/uuid"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/tenancy"
)

// membership maps a member of the tenant tenantID onto the edge's type.
func membership(m tenancy.Member, tenantID uuid.UUID) *model.Membership {
	out := &model.Membership{
		User:   &model.User{UserID: m.User.ID, Row: &m.User},
		Tenant: &model.Tenant{TenantID: tenantID}, Role: model.Role(m.Role), Pending: m.Pending, JoinedAt: m.JoinedAt,
	}
	if m.InvitationToken != "" {
		out.InvitationToken = &m.InvitationToken
	}
	return out
}

// membershipConnection pages members by user id (n of rows, one more telling of a next page).
func membershipConnection(rows []tenancy.Member, tenantID uuid.UUID, n int) *model.MembershipConnection {
	conn := &model.MembershipConnection{Edges: []*model.MembershipEdge{}, PageInfo: &model.PageInfo{HasNextPage: len(rows) > n}}
	for i := range rows[:min(n, len(rows))] {
		c := model.EncodeCursor("u", rows[i].User.ID.String())
		conn.Edges = append(conn.Edges, &model.MembershipEdge{Cursor: c, Node: membership(rows[i], tenantID)})
		conn.PageInfo.EndCursor = &c
	}
	return conn
}
