// Package loader batches the GraphQL edge's lookups per request (dataloaders), so that a list of
// objects costs one query per kind of related object, not one per object: a page of messages
// with their runs, and the runs' conversations, tasks, tool calls and approvals, costs the same
// number of queries for 50 messages as for one.
package loader

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/vikstrous/dataloadgen"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/chat"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/subagent"
	"github.com/agentry/agentry/internal/task"
	"github.com/agentry/agentry/internal/tenancy"
)

// Services are what the loaders read through; each enforces the caller's access as its
// single-object reads do.
type Services struct {
	Tenancy   *tenancy.Service
	Runs      *run.Service
	Chat      *chat.Service
	Tasks     *task.Service
	Approvals *approval.Service
	Subagents *subagent.Service
}

// Loaders are one request's dataloaders.
type Loaders struct {
	user         *dataloadgen.Loader[uuid.UUID, dbsqlc.User]
	tenant       *dataloadgen.Loader[uuid.UUID, dbsqlc.Tenant]
	run          *dataloadgen.Loader[uuid.UUID, dbsqlc.Run]
	conversation *dataloadgen.Loader[uuid.UUID, dbsqlc.Conversation]
	task         *dataloadgen.Loader[uuid.UUID, dbsqlc.Task]
	toolCalls    *dataloadgen.Loader[uuid.UUID, []dbsqlc.ToolCall]
	approvals    *dataloadgen.Loader[uuid.UUID, []dbsqlc.Approval]
	subagents    *dataloadgen.Loader[uuid.UUID, []dbsqlc.Subagent]
	treeUsage    *dataloadgen.Loader[uuid.UUID, dbsqlc.RunTreeUsageByIDsRow]
}

type key struct{}

// wait is how long a loader gathers keys before it fetches them: the field resolvers of a list's
// elements run concurrently and ask within it, even on a busy machine.
var wait = dataloadgen.WithWait(2 * time.Millisecond)

// New returns fresh loaders backed by s.
func New(s Services) *Loaders {
	return &Loaders{
		user:         dataloadgen.NewMappedLoader(s.Tenancy.UsersByIDs, wait),
		tenant:       dataloadgen.NewMappedLoader(tenants(s.Tenancy), wait),
		run:          dataloadgen.NewMappedLoader(s.Runs.ByIDs, wait),
		conversation: dataloadgen.NewMappedLoader(s.Chat.ConversationsByIDs, wait),
		task:         dataloadgen.NewMappedLoader(s.Tasks.ByIDs, wait),
		toolCalls:    dataloadgen.NewMappedLoader(s.Runs.ToolCallsByRuns, wait),
		approvals:    dataloadgen.NewMappedLoader(s.Approvals.ListByRuns, wait),
		subagents:    dataloadgen.NewMappedLoader(s.Subagents.ByParents, wait),
		treeUsage:    dataloadgen.NewMappedLoader(s.Subagents.TreeUsageByRuns, wait),
	}
}

// tenants reads tenants one by one: a caller sees only their own, so a request asks for one.
func tenants(ten *tenancy.Service) func(context.Context, []uuid.UUID) (map[uuid.UUID]dbsqlc.Tenant, error) {
	return func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]dbsqlc.Tenant, error) {
		out := make(map[uuid.UUID]dbsqlc.Tenant, len(ids))
		for _, id := range ids {
			t, err := ten.TenantByID(ctx, id)
			if apperr.CodeOf(err) == apperr.NotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[id] = t
		}
		return out, nil
	}
}

// one loads the object of id; an id the caller may not see is NOT_FOUND (what).
func one[V any](ctx context.Context, l *dataloadgen.Loader[uuid.UUID, V], id uuid.UUID, what string) (V, error) {
	v, err := l.Load(ctx, id)
	if errors.Is(err, dataloadgen.ErrNotFound) {
		return v, apperr.NotFoundf(what)
	}
	return v, err
}

// many loads the objects belonging to id (none when it has none).
func many[V any](ctx context.Context, l *dataloadgen.Loader[uuid.UUID, []V], id uuid.UUID) ([]V, error) {
	v, err := l.Load(ctx, id)
	if errors.Is(err, dataloadgen.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// User loads a user of the caller's tenant; any other is NOT_FOUND.
func (l *Loaders) User(ctx context.Context, id uuid.UUID) (dbsqlc.User, error) {
	return one(ctx, l.user, id, "user")
}

// Tenant loads the caller's tenant; any other is NOT_FOUND.
func (l *Loaders) Tenant(ctx context.Context, id uuid.UUID) (dbsqlc.Tenant, error) {
	return one(ctx, l.tenant, id, "tenant")
}

// Run loads a run of the caller's tenant; any other is NOT_FOUND.
func (l *Loaders) Run(ctx context.Context, id uuid.UUID) (dbsqlc.Run, error) {
	return one(ctx, l.run, id, "run")
}

// Conversation loads a conversation of the caller's tenant; any other is NOT_FOUND.
func (l *Loaders) Conversation(ctx context.Context, id uuid.UUID) (dbsqlc.Conversation, error) {
	return one(ctx, l.conversation, id, "conversation")
}

// Task loads a task of the caller's tenant; any other is NOT_FOUND.
func (l *Loaders) Task(ctx context.Context, id uuid.UUID) (dbsqlc.Task, error) {
	return one(ctx, l.task, id, "task")
}

// ToolCalls loads a run's tool calls in the order they were made.
func (l *Loaders) ToolCalls(ctx context.Context, runID uuid.UUID) ([]dbsqlc.ToolCall, error) {
	return many(ctx, l.toolCalls, runID)
}

// Approvals loads a run's approvals, oldest first.
func (l *Loaders) Approvals(ctx context.Context, runID uuid.UUID) ([]dbsqlc.Approval, error) {
	return many(ctx, l.approvals, runID)
}

// Subagents loads a run's sub-agents, oldest first.
func (l *Loaders) Subagents(ctx context.Context, runID uuid.UUID) ([]dbsqlc.Subagent, error) {
	return many(ctx, l.subagents, runID)
}

// TreeUsage loads the usage of a run and all its descendants (zero when it has none).
func (l *Loaders) TreeUsage(ctx context.Context, runID uuid.UUID) (dbsqlc.RunTreeUsageByIDsRow, error) {
	u, err := l.treeUsage.Load(ctx, runID)
	if errors.Is(err, dataloadgen.ErrNotFound) {
		return dbsqlc.RunTreeUsageByIDsRow{RunID: runID}, nil
	}
	return u, err
}

// With returns ctx carrying l.
func With(ctx context.Context, l *Loaders) context.Context { return context.WithValue(ctx, key{}, l) }

// From returns the request's loaders.
func From(ctx context.Context) *Loaders {
	l, _ := ctx.Value(key{}).(*Loaders)
	return l
}
