package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/ratelimit"
	"github.com/agentry/agentry/internal/server"
	"github.com/agentry/agentry/internal/usage"
)

// setBudgetInput maps setBudget's input onto the domain's.
func setBudgetInput(in model.SetBudgetInput) (usage.SetBudget, error) {
	out := usage.SetBudget{Scope: string(in.Scope), Period: string(in.Period), TokenLimit: in.TokenLimit, CostLimitMicros: in.CostLimitMicros}
	if in.UserID != nil {
		id, err := model.DecodeID("User", *in.UserID)
		if err != nil {
			return out, err
		}
		out.UserID = id
	}
	return out, nil
}

// usageBuckets maps summary buckets; user and tenant keys become global ids.
func usageBuckets(rows []usage.Bucket, groupBy string) []*model.UsageBucket {
	out := make([]*model.UsageBucket, len(rows))
	for i, b := range rows {
		key := b.Key
		if id, err := uuid.Parse(key); err == nil {
			switch groupBy {
			case usage.GroupUser:
				key = model.EncodeID("User", id)
			case usage.GroupTenant:
				key = model.EncodeID("Tenant", id)
			}
		}
		out[i] = &model.UsageBucket{Key: key, Calls: b.Calls, InputTokens: b.InputTokens, OutputTokens: b.OutputTokens, CostMicros: b.CostMicros}
	}
	return out
}

// budgetNode resolves node(id) for a Budget.
func (r *Resolver) budgetNode(ctx context.Context, id uuid.UUID) (model.Node, error) {
	b, err := r.Usage.Budget(ctx, id)
	if err != nil {
		return nil, err
	}
	return &model.Budget{Row: b}, nil
}

// Mutations limited per client IP (and, for those naming an account's email, per account),
// those that make the agent spend (limited per tenant and per API key), and those that create
// something or send an email (limited per user, or per API key).
var (
	authMutations    = map[string]bool{"logIn": true, "signUp": true, "requestPasswordReset": true}
	accountMutations = map[string]func(args map[string]any) string{
		"logIn": func(args map[string]any) string {
			in, _ := args["input"].(map[string]any)
			e, _ := in["email"].(string)
			return e
		},
		"requestPasswordReset": func(args map[string]any) string { e, _ := args["email"].(string); return e },
	}
	spendMutations  = map[string]bool{"sendMessage": true, "runTask": true, "runRoutine": true, "resolveApproval": true, "resumeRun": true, "resolveRollback": true}
	createMutations = map[string]bool{"createConversation": true, "createApiKey": true, "addMember": true, "createTask": true, "createSnapshot": true, "createRole": true, "saveRoutine": true,
		"requestEmailVerification": true, "createWebhook": true, "testWebhook": true}
)

// rateLimit is the one place rate limits apply: before the resolver of a limited root mutation
// field runs. A refusal is RATE_LIMITED with retryAfter (seconds) in the extensions and the
// field answers null.
func rateLimit(l *ratelimit.Limiter) graphql.RootFieldMiddleware {
	return func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		rc := graphql.GetRootFieldContext(ctx)
		if l == nil || rc == nil || !graphql.HasOperationContext(ctx) || graphql.GetOperationContext(ctx).Operation.Operation != ast.Mutation {
			return next(ctx)
		}
		var err error
		switch name := rc.Field.Name; {
		case authMutations[name]:
			err = l.Auth(ctx, server.ClientIPFrom(ctx))
			if email := accountMutations[name]; err == nil && email != nil {
				err = l.Account(ctx, email(rc.Field.ArgumentMap(graphql.GetOperationContext(ctx).Variables)))
			}
		case spendMutations[name]:
			a, ok := auth.ActorFrom(ctx)
			if !ok {
				break // anonymous: the resolver answers UNAUTHENTICATED
			}
			err = l.Spend(ctx, a)
		case createMutations[name]:
			if a, ok := auth.ActorFrom(ctx); ok {
				err = l.Create(ctx, a)
			}
		}
		if err != nil {
			graphql.AddError(ctx, gqlerror.WrapPath(ast.Path{ast.PathName(rc.Field.Alias)}, err))
			return graphql.Null
		}
		return next(ctx)
	}
}
