package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/apperr"
)

// node loads the object of type typ (the type inside a global id) with id, for Query.node:
// every type that implements Node. An unknown type is NOT_FOUND, like a missing object.
func (r *Resolver) node(ctx context.Context, typ string, id uuid.UUID) (model.Node, error) {
	switch typ {
	case "User":
		u := &model.User{UserID: id}
		return u, loadUser(ctx, u)
	case "Tenant":
		t, err := r.Tenancy.TenantByID(ctx, id)
		return &model.Tenant{TenantID: t.ID, Row: &t}, err
	case "ApiKey":
		k, err := r.Auth.GetAPIKey(ctx, id)
		return &model.APIKey{Row: k}, err
	case "Conversation":
		c, err := r.Chat.Conversation(ctx, id)
		return &model.Conversation{Row: c}, err
	case "Message":
		m, err := r.Chat.Message(ctx, id)
		return &model.Message{Row: m}, err
	case "Run":
		row, err := r.RunService.Get(ctx, id)
		return &model.Run{Row: row}, err
	case "ToolCall":
		c, err := r.RunService.ToolCall(ctx, id)
		return &model.ToolCall{Row: c}, err
	case "Subagent":
		sa, err := r.Subagents.Get(ctx, id)
		return &model.Subagent{Row: sa}, err
	case "Task":
		t, err := r.Tasks.Get(ctx, id)
		return &model.Task{Row: t}, err
	case "Approval":
		a, err := r.Approvals.Get(ctx, id)
		return &model.Approval{Row: a}, err
	case "Budget":
		return r.budgetNode(ctx, id)
	case "RoutineRole":
		ro, err := r.RoutineService.Role(ctx, id)
		return &model.RoutineRole{Row: ro}, err
	case "Routine":
		rt, err := r.RoutineService.Routine(ctx, id)
		return &model.Routine{Row: rt}, err
	case "Webhook":
		w, err := r.Webhooks.Get(ctx, id)
		return &model.Webhook{Row: w}, err
	case "Snapshot":
		sn, err := r.Workspaces.Snapshot(ctx, id)
		return &model.Snapshot{Row: sn}, err
	}
	return nil, apperr.NotFoundf("node")
}
