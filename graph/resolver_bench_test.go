package graph_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentry/agentry/graph"
	"github.com/agentry/agentry/internal/auth"
)

// BenchmarkViewerQuery is the resolver path in-process: the GraphQL handler (parse with the
// query cache, validate, the limits, execute, marshal) answering an authenticated
// `{ viewer { user { id } } }`, without HTTP or authentication (agentry bench's GQL-TPUT
// measures those too).
func BenchmarkViewerQuery(b *testing.B) {
	h := graph.NewHandler(graph.HandlerOptions{Resolver: &graph.Resolver{Log: slog.New(slog.DiscardHandler)}})
	ctx := auth.WithActor(context.Background(), auth.Actor{UserID: uuid.Must(uuid.NewV7()), TenantID: uuid.Must(uuid.NewV7()), Role: auth.RoleOwner})
	const body = `{"query":"{ viewer { user { id } } }"}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/graphql", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"id":"`) {
			b.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
		}
	}
}
