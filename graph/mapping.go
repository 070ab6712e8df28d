package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/graph/loader"
	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/settings"
)

// The helpers below map domain values onto the edge's types.

func authPayload(s auth.Session) *model.AuthPayload {
	return &model.AuthPayload{AccessToken: s.AccessToken, RefreshToken: s.RefreshToken, ExpiresAt: s.ExpiresAt, Viewer: viewer(s.Actor)}
}

// sessionPayload maps a session opened by signUp, logIn or refreshSession. The request carries no
// actor (or another credential's), so the viewer's user and tenant are loaded here as the new
// session's actor: left to their field resolvers they would fail (UNAUTHENTICATED) or be looked
// up in the wrong tenant.
func (r *Resolver) sessionPayload(ctx context.Context, s auth.Session) (*model.AuthPayload, error) {
	p := authPayload(s)
	if s.User != nil && s.Tenant != nil {
		p.Viewer.User.Row, p.Viewer.Tenant.Row = s.User, s.Tenant
		return p, nil
	}
	ctx = auth.WithActor(ctx, s.Actor)
	u, err := r.Tenancy.User(ctx, s.Actor.UserID)
	if err != nil {
		return nil, err
	}
	t, err := r.Tenancy.Tenant(ctx)
	if err != nil {
		return nil, err
	}
	p.Viewer.User.Row, p.Viewer.Tenant.Row = &u, &t
	return p, nil
}

func viewer(a auth.Actor) *model.Viewer {
	return &model.Viewer{User: &model.User{UserID: a.UserID}, Tenant: &model.Tenant{TenantID: a.TenantID}, Role: model.Role(a.Role), PlatformAdmin: a.PlatformAdmin}
}

// loadUser fills obj.Row through the request's batched loader.
func loadUser(ctx context.Context, obj *model.User) error {
	if obj.Row != nil {
		return nil
	}
	u, err := loader.From(ctx).User(ctx, obj.UserID)
	if err != nil {
		return err
	}
	obj.Row = &u
	return nil
}

func agentSettings(s settings.Settings) *model.AgentSettings {
	return &model.AgentSettings{
		Personality: model.Personality(s.Personality), Verbosity: model.Verbosity(s.Verbosity),
		AutoExecute: s.AutoExecute, ApprovalThreshold: s.ApprovalThreshold, MaxTokensPerTask: s.MaxTokensPerTask,
		MaxRetries: s.MaxRetries, TimeoutSeconds: s.TimeoutSeconds, ContextStrategy: model.ContextStrategy(s.ContextStrategy),
		SubagentApproval: model.SubagentApproval(s.SubagentApproval),
		Team: &model.TeamDefaults{
			MaxIterations: s.Team.MaxIterations, TimeoutMinutes: s.Team.TimeoutMinutes, TokenBudget: s.Team.TokenBudget,
			ArchitectMaxTurns: s.Team.ArchitectMaxTurns, ExecutorMaxTurns: s.Team.ExecutorMaxTurns, ReviewerMaxTurns: s.Team.ReviewerMaxTurns,
		},
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func runConnection(rows []dbsqlc.Run, n int) *model.RunConnection {
	conn := &model.RunConnection{Edges: []*model.RunEdge{}, PageInfo: &model.PageInfo{HasNextPage: len(rows) > n}}
	for i := range rows[:min(n, len(rows))] {
		c := model.EncodeCursor("r", rows[i].ID.String())
		conn.Edges = append(conn.Edges, &model.RunEdge{Cursor: c, Node: &model.Run{Row: rows[i]}})
		conn.PageInfo.EndCursor = &c
	}
	return conn
}

// forward maps a subscription's events onto the edge's type until either side ends.
func forward(ctx context.Context, in <-chan events.Event) <-chan *model.RunEvent {
	out := make(chan *model.RunEvent, 1)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case out <- &model.RunEvent{Ev: ev}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// runControl decodes a run id and applies a run service control operation.
func (r *Resolver) runControl(ctx context.Context, id string, op func(context.Context, uuid.UUID) (dbsqlc.Run, error)) (*model.Run, error) {
	rid, err := model.DecodeID("Run", id)
	if err != nil {
		return nil, err
	}
	row, err := op(ctx, rid)
	if err != nil {
		return nil, err
	}
	return &model.Run{Row: row}, nil
}

// yes is what a Boolean mutation that did its work answers (its field is nullable so that an
// error of one alias leaves the others' answers).
var yes = true
