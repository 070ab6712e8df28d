package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/apperr"
)

// errorPresenter is the one place where domain errors become GraphQL errors: the code goes to
// extensions.code; an error without a code is logged whole and answered as "internal error".
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		if in, ok := errors.AsType[*model.InputError](err); ok {
			// A scalar argument that cannot be read: name it from the error's path.
			field := argumentName(gqlErr.Path)
			gqlErr.Message = field + ": " + in.Reason
			gqlErr.Extensions = map[string]any{"code": string(apperr.BadUserInput), "field": field}
			return gqlErr
		}
		if e, ok := apperr.As(err); ok {
			if e.Code == apperr.Internal {
				log.ErrorContext(ctx, "internal error", slog.Any("error", err))
				gqlErr.Message = "internal error"
			} else {
				gqlErr.Message = e.Message
			}
			gqlErr.Extensions = map[string]any{"code": string(e.Code)}
			for k, v := range e.Fields {
				gqlErr.Extensions[k] = model.GlobalIDValue(k, v) // ids as global ids, like arguments
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

// argumentName is the last name in an argument error's path (the argument, or the input field
// holding the value).
func argumentName(path ast.Path) string {
	for i := len(path) - 1; i >= 0; i-- {
		if n, ok := path[i].(ast.PathName); ok {
			return string(n)
		}
	}
	return "argument"
}

// recoverFunc turns a resolver panic into an internal error, logged with its value.
func recoverFunc(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "resolver panic", slog.Any("panic", p))
		return &apperr.Error{Code: apperr.Internal, Message: "internal error", Err: fmt.Errorf("panic: %v", p)}
	}
}
