// Package graph is agentry's GraphQL edge: the schema (schema/*.graphqls), thin resolvers that
// read the actor, call a domain service and map the result, the error presenter, and the
// handler with its transports and limits.
package graph

import (
	"log/slog"

	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/chat"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/health"
	"github.com/agentry/agentry/internal/memory"
	"github.com/agentry/agentry/internal/ratelimit"
	"github.com/agentry/agentry/internal/routine"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/subagent"
	"github.com/agentry/agentry/internal/task"
	"github.com/agentry/agentry/internal/team"
	"github.com/agentry/agentry/internal/tenancy"
	"github.com/agentry/agentry/internal/usage"
	"github.com/agentry/agentry/internal/webhook"
	"github.com/agentry/agentry/internal/workspace"
)

// Resolver holds the services the resolvers call. It is the edge's dependency injection.
type Resolver struct {
	Auth       *auth.Service
	Tenancy    *tenancy.Service
	Settings   *settings.Service
	Chat       *chat.Service
	RunService *run.Service
	Tasks      *task.Service // in queryResolver the Tasks method shadows it: use r.Resolver.Tasks
	Teams      *team.Service
	Approvals  *approval.Service // in runResolver the Approvals method shadows it: use r.Resolver.Approvals
	Hub        *events.Hub
	Memory     *memory.Service
	Usage      *usage.Service
	RateLimits *ratelimit.Limiter // nil: no rate limits
	Workspaces *workspace.Service
	Subagents  *subagent.Service
	Webhooks   *webhook.Service
	// Health lists the checks platformHealth runs.
	Health []health.Check
	// RoutineService is the routine domain (queryResolver's Routines method would shadow a field of that name).
	RoutineService *routine.Service
	Log            *slog.Logger
}
