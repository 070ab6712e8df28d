package graph

import (
	"context"

	"github.com/agentry/agentry/graph/loader"
	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/settings"
)

// The helpers below map domain values onto the edge's types.

func authPayload(s auth.Session) *model.AuthPayload {
	return &model.AuthPayload{AccessToken: s.AccessToken, RefreshToken: s.RefreshToken, ExpiresAt: s.ExpiresAt, Viewer: viewer(s.Actor)}
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
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
