// Package server is agentry's HTTP layer: the mux, middleware (request ids, recovery, metrics,
// authentication, body limits, CORS) and health endpoints.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/health"
	"github.com/agentry/agentry/internal/telemetry"
)

// Authenticator resolves a bearer credential to an actor (auth.Service).
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (auth.Actor, time.Time, error)
}

// Checker is one readiness check (Postgres, Redis, River's leader).
type Checker = health.Check

// Options configure the HTTP handler.
type Options struct {
	Log            *slog.Logger
	Auth           Authenticator // nil: no /graphql (worker processes)
	GraphQL        http.Handler
	Web            http.Handler
	AdminJobs      http.Handler // River UI, platform admins only; nil: not mounted
	Ready          []Checker
	Registry       *prometheus.Registry
	MaxBodyBytes   int64
	AllowedOrigins []string
	// Tracing restores the trace context of incoming requests (W3C traceparent headers).
	Tracing bool
}

// New returns agentry's root handler: the API, the web app, /livez and /readyz. /metrics is
// not on it: it is on the health address's handler (Health).
func New(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", livez)
	mux.Handle("GET /readyz", readyz(o.Ready))
	if o.GraphQL != nil {
		gql := authenticate(o.Auth, o.Log, limitBody(o.MaxBodyBytes, o.GraphQL))
		mux.Handle("/graphql", cors(o.AllowedOrigins, gql))
		mux.Handle("/graphql/", cors(o.AllowedOrigins, gql)) // development: GraphiQL's assets, schema.graphql
	}
	if o.AdminJobs != nil {
		admin := platformAdminOnly(o.Auth, o.Log, o.AdminJobs)
		mux.Handle("/admin/jobs", admin)
		mux.Handle("/admin/jobs/", admin)
	}
	if o.Web != nil {
		mux.Handle("/", o.Web)
	}
	var h http.Handler = mux
	if o.Registry != nil {
		h = instrument(o.Registry, h)
	}
	if o.Tracing {
		h = propagate(h)
	}
	return requestID(clientIP(recoverer(o.Log, h)))
}

// propagate continues the caller's trace (its traceparent header), if it sent one.
func propagate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}

type clientIPKey struct{}

// ClientIPFrom returns the IP address of the request's client ("" outside a request): the
// connection's peer (behind a reverse proxy, the proxy's). Rate limits per IP use it.
func ClientIPFrom(ctx context.Context) string {
	ip, _ := ctx.Value(clientIPKey{}).(string)
	return ip
}

func clientIP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientIPKey{}, host)))
	})
}

type requestIDKey struct{}

// RequestIDFrom returns the request id of ctx ("" outside a request).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func recoverer(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(r.Context(), "http handler panic", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
				writeError(w, http.StatusInternalServerError, apperr.Internal, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// writeError answers in the GraphQL error shape so clients need one parser for every failure.
func writeError(w http.ResponseWriter, status int, code apperr.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]any{{"message": msg, "extensions": map[string]any{"code": string(code)}}},
	})
}

// authenticate puts the actor of the Authorization header in the context. A request without the
// header proceeds anonymously (sign-up, log-in, WebSocket upgrades that authenticate in
// connection_init); a bad credential is 401.
func authenticate(a Authenticator, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := auth.BearerToken(h)
		if !ok || token == "" {
			writeError(w, http.StatusUnauthorized, apperr.Unauthenticated, "Authorization must be \"Bearer <access token or API key>\"")
			return
		}
		actor, _, err := a.Authenticate(r.Context(), token)
		if err != nil {
			if apperr.CodeOf(err) != apperr.Unauthenticated {
				log.ErrorContext(r.Context(), "authenticate", slog.Any("error", err))
				writeError(w, http.StatusServiceUnavailable, apperr.Internal, "authentication is unavailable, try again")
				return
			}
			e, _ := apperr.As(err)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, apperr.Unauthenticated, e.Message)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithActor(r.Context(), actor)))
	})
}

// AdminCookie is the cookie that carries an access token to the jobs UI (/admin/jobs), whose
// pages a browser loads by navigation, without an Authorization header. The web app sets it
// (Path=/admin/jobs, SameSite=Strict) before it opens the UI.
const AdminCookie = "agentry_admin_token"

// platformAdminOnly serves next to platform admins, authenticated by the Authorization header
// or the AdminCookie. Everyone else, signed in or not, gets 404: the UI's existence is not
// revealed. A request that changes something must come from the same origin (CSRF).
func platformAdminOnly(a Authenticator, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := auth.BearerToken(r.Header.Get("Authorization"))
		if !ok || token == "" {
			if c, err := r.Cookie(AdminCookie); err == nil {
				token = c.Value
			}
		}
		if token == "" || a == nil {
			http.NotFound(w, r)
			return
		}
		actor, _, err := a.Authenticate(r.Context(), token)
		if err != nil || !actor.PlatformAdmin {
			if err != nil && apperr.CodeOf(err) != apperr.Unauthenticated {
				log.ErrorContext(r.Context(), "authenticate admin", slog.Any("error", err))
			}
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r) {
				writeError(w, http.StatusForbidden, apperr.Forbidden, "cross-origin requests to the jobs UI are refused")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(auth.WithActor(r.Context(), actor)))
	})
}

// sameOrigin reports whether origin (an Origin header) names r's own host.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// limitBody refuses request bodies larger than max before the GraphQL handler reads them.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		tooBig := func() {
			writeError(w, http.StatusRequestEntityTooLarge, apperr.BadUserInput, fmt.Sprintf("request body exceeds the limit of %d bytes", max))
		}
		if r.ContentLength > max {
			tooBig()
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tooBig()
			return
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, apperr.BadUserInput, "could not read the request body")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// cors answers browser preflights and tags responses for the allowed origins.
func cors(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && (slices.Contains(allowed, origin) || slices.Contains(allowed, "*")) {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id")
				w.Header().Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// readyz answers 200 when every check passes, else 503; the body names each dependency with
// "ok" or "error: <why>".
func readyz(checks []Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusOK
		result := map[string]string{}
		for _, c := range health.Run(r.Context(), checks) {
			if !c.OK {
				status = http.StatusServiceUnavailable
				result[c.Name] = "error: " + c.Error
			} else {
				result[c.Name] = "ok"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(result)
	})
}

// instrument records request counts and durations by route and status.
func instrument(reg *prometheus.Registry, next http.Handler) http.Handler {
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agentry_http_request_duration_seconds", Help: "HTTP request duration by route, method and status.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "method", "code"})
	inflight := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentry_http_requests_in_flight", Help: "HTTP requests being served."})
	reg.MustRegister(dur, inflight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := "/"
		switch {
		case r.URL.Path == "/graphql", r.URL.Path == "/livez", r.URL.Path == "/readyz", r.URL.Path == "/metrics":
			route = r.URL.Path
		case strings.HasPrefix(r.URL.Path, "/admin/jobs"):
			route = "/admin/jobs"
		}
		start := time.Now()
		inflight.Inc()
		rw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			inflight.Dec()
			dur.WithLabelValues(route, r.Method, strconv.Itoa(rw.code)).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rw, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer (WebSocket hijacking, SSE
// flushing).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush forwards to the underlying writer (SSE).
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
