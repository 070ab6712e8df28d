package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/agentry/agentry/internal/apperr"
)

// errorPresenter is the one place where domain errors become GraphQL errors: the code goes to
// extensions.code; an error without a code is logged whole and answered as "internal error".
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		if e, ok := apperr.As(err); ok {
			if e.Code == apperr.Internal {
				log.ErrorContext(ctx, "internal error", slog.Any("error", err))
				gqlErr.Message = "internal error"
			} else {
				gqlErr.Message = e.Message
			}
			gqlErr.Extensions = map[string]any{"code": string(e.Code)}
			for k, v := range e.Fields {
				gqlErr.Extensions[k] = v
			}
			return gqlErr
		}
		var parsed *gqlerror.Error
		if errors.As(err, &parsed) && parsed.Extensions != nil && parsed.Extensions["code"] != nil {
			// Parser and validation failures already carry gqlgen's codes (GRAPHQL_PARSE_FAILED,
			// GRAPHQL_VALIDATION_FAILED); keep them.
			return gqlErr
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			gqlErr.Message = "request cancelled or timed out"
			gqlErr.Extensions = map[string]any{"code": string(apperr.Internal)}
			return gqlErr
		}
		if parsed != nil && parsed.Err != nil && parsed.Err.Error() == "introspection disabled" {
			// gqlgen refuses __schema and __type outside development with this plain error.
			gqlErr.Message = "introspection is disabled in production"
			gqlErr.Extensions = map[string]any{"code": string(apperr.Forbidden)}
			return gqlErr
		}
		if parsed != nil && parsed.Err == nil && len(gqlErr.Path) == 0 {
			// Errors gqlgen raises itself outside resolvers (bad variables, limits) are the
			// caller's to fix.
			gqlErr.Extensions = map[string]any{"code": string(apperr.BadUserInput)}
			return gqlErr
		}
		log.ErrorContext(ctx, "internal error", slog.Any("error", err), slog.String("path", fmt.Sprint(gqlErr.Path)))
		gqlErr.Message = "internal error"
		gqlErr.Extensions = map[string]any{"code": string(apperr.Internal)}
		return gqlErr
	}
}

// recoverFunc turns a resolver panic into an internal error, logged with its value.
func recoverFunc(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "resolver panic", slog.Any("panic", p))
		return &apperr.Error{Code: apperr.Internal, Message: "internal error", Err: fmt.Errorf("panic: %v", p)}
	}
}
