package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceOperations makes a span of each query and mutation, named after the operation type and
// name, ended with its (first) response. Variables are not recorded: they hold what users typed.
// Subscriptions are not traced: they last as long as a socket.
func traceOperations(tracer trace.Tracer) graphql.OperationMiddleware {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		oc := graphql.GetOperationContext(ctx)
		if oc.Operation == nil || oc.Operation.Operation == ast.Subscription {
			return next(ctx)
		}
		name := "graphql." + string(oc.Operation.Operation)
		if oc.OperationName != "" {
			name += " " + oc.OperationName
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("graphql.operation.type", string(oc.Operation.Operation)),
			attribute.String("graphql.operation.name", oc.OperationName)))
		h := next(ctx)
		return func(ctx context.Context) *graphql.Response {
			resp := h(ctx)
			if resp != nil && len(resp.Errors) > 0 {
				span.SetStatus(codes.Error, resp.Errors[0].Message)
			}
			span.End()
			return resp
		}
	}
}
