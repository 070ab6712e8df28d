package app

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/server"
)

// NewLogger returns the process logger: JSON in production, text in development. Every record
// logged with a context carries the request id and the actor's tenant and user. River's routine
// reports (its producers' job counts every few seconds, its maintenance services' runs) are
// logged at debug, so that they do not drown what happens.
func NewLogger(w io.Writer, json bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(ctxHandler{h})
}

type ctxHandler struct{ slog.Handler }

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && riverChatter(r.Message) {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	if id := server.RequestIDFrom(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	if a, ok := auth.ActorFrom(ctx); ok {
		r.AddAttrs(slog.String("tenant_id", a.TenantID.String()), slog.String("user_id", a.UserID.String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h ctxHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return ctxHandler{h.Handler.WithAttrs(attrs)}
}

func (h ctxHandler) WithGroup(name string) slog.Handler { return ctxHandler{h.Handler.WithGroup(name)} }

// riverChatter reports whether msg is one of River's routine reports.
func riverChatter(msg string) bool {
	return strings.HasSuffix(msg, ": Producer job counts") || strings.Contains(msg, ": Ran successfully")
}
