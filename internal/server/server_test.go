package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/server"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// get sends a GET to h and returns the recorded answer.
func get(t *testing.T, h http.Handler, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// gqlError decodes the GraphQL error shape every failure is answered in.
func gqlError(t *testing.T, body []byte) (msg, code string) {
	t.Helper()
	var out struct {
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	require.NoError(t, json.Unmarshal(body, &out), "%s", body)
	require.Len(t, out.Errors, 1, "%s", body)
	return out.Errors[0].Message, out.Errors[0].Extensions.Code
}

func TestLivez(t *testing.T) {
	t.Parallel()
	h := server.New(server.Options{Log: quietLog()})
	rec := get(t, h, "/livez", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "ok\n", rec.Body.String())

	// Only GET.
	req := httptest.NewRequest(http.MethodPost, "/livez", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestReadyzFailingDependency(t *testing.T) {
	t.Parallel()
	ok := server.Checker{Name: "postgres", Check: func(context.Context) error { return nil }}
	down := server.Checker{Name: "redis", Check: func(context.Context) error { return errors.New("dial tcp: connection refused") }}
	hangs := server.Checker{Name: "redis", Check: func(ctx context.Context) error {
		<-ctx.Done() // a dependency that never answers: the check's own timeout ends it
		return ctx.Err()
	}}

	rec := get(t, server.New(server.Options{Log: quietLog(), Ready: []server.Checker{ok}}), "/readyz", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"postgres":"ok"}`, rec.Body.String())

	rec = get(t, server.New(server.Options{Log: quietLog(), Ready: []server.Checker{ok, down}}), "/readyz", nil)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, "ok", body["postgres"])
	require.Contains(t, body["redis"], "error")
	require.Contains(t, body["redis"], "connection refused")

	start := time.Now()
	rec = get(t, server.New(server.Options{Log: quietLog(), Ready: []server.Checker{ok, hangs}}), "/readyz", nil)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Less(t, time.Since(start), 3*time.Second, "a hung dependency must not hang /readyz")
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Contains(t, body["redis"], "deadline exceeded")
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	h := server.New(server.Options{Log: quietLog(), Web: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, server.RequestIDFrom(r.Context()))
	})})

	// Echoed, and the handler sees the same id.
	rec := get(t, h, "/", http.Header{"X-Request-Id": {"req-abc-123"}})
	require.Equal(t, "req-abc-123", rec.Header().Get("X-Request-Id"))
	require.Equal(t, "req-abc-123", rec.Body.String())

	// Generated when absent: 16 hex digits, different each time.
	rec = get(t, h, "/", nil)
	id := rec.Header().Get("X-Request-Id")
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{16}$`), id)
	require.Equal(t, id, rec.Body.String())
	require.NotEqual(t, id, get(t, h, "/", nil).Header().Get("X-Request-Id"))

	// An oversized id is replaced, not echoed.
	long := strings.Repeat("x", 65)
	rec = get(t, h, "/", http.Header{"X-Request-Id": {long}})
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{16}$`), rec.Header().Get("X-Request-Id"))

	// Outside a request there is none.
	require.Empty(t, server.RequestIDFrom(context.Background()))
}

func TestPanicBecomesInternalError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := server.New(server.Options{Log: quietLog(), Registry: reg, Web: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom: secret detail")
	})})
	rec := get(t, h, "/anything", http.Header{"X-Request-Id": {"panic-1"}})
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, "panic-1", rec.Header().Get("X-Request-Id"))
	msg, code := gqlError(t, rec.Body.Bytes())
	require.Equal(t, "INTERNAL", code)
	require.Equal(t, "internal error", msg)
	require.NotContains(t, rec.Body.String(), "secret detail")

	// The server keeps serving.
	require.Equal(t, http.StatusOK, get(t, h, "/livez", nil).Code)
}

func TestBodyLimitStopsBeforeGraphQL(t *testing.T) {
	t.Parallel()
	reached := false
	h := server.New(server.Options{Log: quietLog(), MaxBodyBytes: 1024, GraphQL: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})})
	post := func(body io.Reader, length int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/graphql", body)
		req.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, length := range []int64{1025, -1} { // declared, and unknown (chunked)
		reached = false
		rec := post(strings.NewReader(strings.Repeat("a", 1025)), length)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
		msg, code := gqlError(t, rec.Body.Bytes())
		require.Equal(t, "BAD_USER_INPUT", code)
		require.Contains(t, msg, "1024 bytes")
		require.False(t, reached, "the GraphQL handler must not see an oversized body")
	}
	rec := post(strings.NewReader(strings.Repeat("a", 1024)), -1)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, 1024, rec.Body.Len())
}

// TestOperationalEndpoints runs the whole app: /readyz checks the real Postgres and Redis and
// /metrics, on the health address only, exposes the runtime, process, HTTP and pool metrics.
func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	health := httptest.NewServer(env.App.Health)
	t.Cleanup(health.Close)
	client := env.Server.Client()
	fetchFrom := func(base, path string) (*http.Response, string) {
		t.Helper()
		res, err := client.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(b)
	}
	fetch := func(path string) (*http.Response, string) {
		t.Helper()
		return fetchFrom(env.Server.URL, path)
	}

	for _, base := range []string{env.Server.URL, health.URL} {
		res, body := fetchFrom(base, "/livez")
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "ok\n", body)
		res, body = fetchFrom(base, "/readyz")
		require.Equal(t, http.StatusOK, res.StatusCode, body)
	}
	res, body := fetch("/livez")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "ok\n", body)
	require.NotEmpty(t, res.Header.Get("X-Request-Id"))

	res, body = fetch("/readyz")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.JSONEq(t, `{"postgres":"ok","redis":"ok"}`, body)

	// Some traffic for the HTTP histogram, including a path that must not become its own label.
	require.Empty(t, env.Do(t, "", `{ __typename }`, nil).Errors)
	fetch("/no/such/page-8c1f")

	// The API's listener does not answer with metrics: anyone can reach it.
	_, body = fetch("/metrics")
	require.NotContains(t, body, "go_goroutines")
	res, body = fetchFrom(health.URL, "/metrics")
	require.Equal(t, http.StatusOK, res.StatusCode)
	for _, want := range []string{
		"go_goroutines ",
		"process_cpu_seconds_total ",
		"process_resident_memory_bytes ",
		`agentry_http_request_duration_seconds_count{code="200",method="POST",route="/graphql"} `,
		`agentry_http_request_duration_seconds_bucket{code="200",method="GET",route="/readyz",le="+Inf"} `,
		`agentry_pg_pool_connections{state="idle"} `,
		`agentry_pg_pool_connections{state="acquired"} `,
		`agentry_pg_pool_connections{state="max"} `,
		"agentry_redis_pool_connections",
		"agentry_http_requests_in_flight ",
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "page-8c1f", "unknown paths share the / route label")
}
