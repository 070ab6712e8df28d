package graph

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/graph/generated"
	"github.com/agentry/agentry/graph/loader"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/metrics"
)

// Limits bound what one GraphQL operation may ask for. Zero fields take the defaults.
type Limits struct {
	MaxDepth       int // default 12
	MaxAliases     int // default 50
	MaxComplexity  int // default 5000 (list fields count their page size: cost.go)
	MaxTokens      int // parser token limit, default 10000
	WSInitTimeout  time.Duration
	WSPingInterval time.Duration

	// MaxTokensAnonymous is the parser token limit of requests without credentials, default 2000.
	MaxTokensAnonymous int
	// MaxResponseBytes caps the data of one answer, default 8 MiB.
	MaxResponseBytes int
	// WSSubscriptions caps the subscriptions one WebSocket runs at once (default 100).
	WSSubscriptions int
	// WSSocketsPerUser caps the WebSockets one user (or API key) holds open on this process at
	// once (default 20).
	WSSocketsPerUser int
}

// HandlerOptions configure the GraphQL handler.
type HandlerOptions struct {
	Resolver *Resolver
	// Development turns on introspection and field suggestions.
	Development bool
	// AllowedOrigins are the browser origins allowed to open WebSockets (besides same-origin).
	AllowedOrigins []string
	Limits         Limits
	// Sockets, when it ends, closes every open WebSocket (graceful shutdown: http.Server's
	// Shutdown does not track hijacked connections).
	Sockets context.Context
	// Metrics counts running subscriptions (nil: not counted).
	Metrics *metrics.Metrics
	// Tracer, when set, makes a span of every query and mutation (nil: tracing off).
	Tracer trace.TracerProvider
}

// NewHandler returns the /graphql handler: gqlgen's POST, GET (queries only), WebSocket
// (graphql-transport-ws, authenticated in connection_init) and SSE transports, with depth,
// alias, complexity and token limits enforced before any resolver runs, caps on a user's
// sockets and a socket's subscriptions, and dataloaders per operation.
func NewHandler(o HandlerOptions) http.Handler {
	l := o.Limits
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxDepth, 12)
	def(&l.MaxAliases, 50)
	def(&l.MaxComplexity, 5000)
	def(&l.MaxTokens, 10000)
	def(&l.MaxTokensAnonymous, 2000)
	def(&l.MaxResponseBytes, 8<<20)
	def(&l.WSSubscriptions, 100)
	def(&l.WSSocketsPerUser, 20)
	if l.WSInitTimeout == 0 {
		l.WSInitTimeout = 10 * time.Second
	}
	if l.WSPingInterval == 0 {
		l.WSPingInterval = 15 * time.Second
	}
	r := o.Resolver
	sockets := newSockets(l.WSSubscriptions, l.WSSocketsPerUser)
	sockets.metrics = o.Metrics
	srv := handler.New(withCosts(generated.NewExecutableSchema(generated.Config{Resolvers: r})))
	srv.AddTransport(transport.Websocket{
		Implementation: uniqueIDs{transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{
			OriginPatterns: originHosts(o.AllowedOrigins),
		}}},
		InitFunc:              wsInit(r.Auth, sockets),
		InitTimeout:           l.WSInitTimeout,
		KeepAlivePingInterval: l.WSPingInterval,
	})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.SSE{}) // before POST: both accept POST, SSE only with Accept: text/event-stream
	srv.AddTransport(transport.POST{})
	srv.Use(requireQuery{})
	cache := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(cache)
	srv.SetParserTokenLimit(l.MaxTokens)
	if o.Development {
		srv.Use(extension.Introspection{})
	} else {
		// gqlgen's switch only covers unknown fields and scalar leaves; arguments, type names,
		// enum values and input fields would still answer "Did you mean".
		srv.SetDisableSuggestion(true)
		srv.SetValidationRulesFn(rulesWithoutSuggestions)
	}
	// queryLimits runs before parsing and validation (limits.go).
	srv.Use(&queryLimits{maxDepth: l.MaxDepth, maxAliases: l.MaxAliases, maxTokens: l.MaxTokens,
		maxTokensAnonymous: l.MaxTokensAnonymous, cache: cache})
	srv.Use(extension.FixedComplexityLimit(l.MaxComplexity))
	srv.AroundResponses(capResponse(l.MaxResponseBytes))
	srv.SetErrorPresenter(errorPresenter(r.Log))
	srv.SetRecoverFunc(recoverFunc(r.Log))
	srv.AroundRootFields(rateLimit(r.RateLimits))
	srv.AroundOperations(sockets.capSubscriptions(errorPresenter(r.Log)))
	if o.Tracer != nil {
		srv.AroundOperations(traceOperations(o.Tracer.Tracer("agentry/graphql")))
	}
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		return next(loader.With(ctx, loader.New(loader.Services{
			Tenancy: r.Tenancy, Runs: r.RunService, Chat: r.Chat, Tasks: r.Tasks, Approvals: r.Approvals, Subagents: r.Subagents,
		})))
	})
	return sockets.serve(o.Sockets, watchSSE(r.Auth, explore(o.Development, refusals(srv))))
}

// watchSSE ends an authenticated SSE stream as soon as its credential stops authenticating
// (logged out, revoked, its user removed) or its role drops (auth.Service.Watch): the
// request's context ends, and with it every subscription the stream carries.
func watchSSE(a *auth.Service, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := auth.ActorFrom(r.Context())
		if !ok || a == nil || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		bearer, _ := auth.BearerToken(r.Header.Get("Authorization"))
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := a.Watch(actor, bearer, cancel)
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// rulesWithoutSuggestions is gqlparser's default rule set with every rule that suggests names
// swapped for its variant that does not.
func rulesWithoutSuggestions() *rules.Rules {
	r := rules.NewDefaultRules()
	for _, swap := range [][2]validator.Rule{
		{rules.KnownArgumentNamesRule, rules.KnownArgumentNamesRuleWithoutSuggestions},
		{rules.KnownTypeNamesRule, rules.KnownTypeNamesRuleWithoutSuggestions},
		{rules.ValuesOfCorrectTypeRule, rules.ValuesOfCorrectTypeRuleWithoutSuggestions},
	} {
		r.RemoveRule(swap[0].Name)
		r.AddRule(swap[1].Name, swap[1].RuleFunc)
	}
	return r
}

// wsInit authenticates a WebSocket in connection_init ({"authorization": "Bearer <token>"}),
// counts it against its user's cap, and bounds the connection's life by the credential's: when
// an access token expires, or the credential is revoked or loses its role, the socket is
// closed.
func wsInit(a *auth.Service, sockets *sockets) transport.WebsocketInitFunc {
	return func(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		raw := p.Authorization()
		if raw == "" {
			if v, ok := p["Authorization"].(string); ok {
				raw = v
			}
		}
		token, ok := auth.BearerToken(raw)
		if !ok || token == "" {
			return rejectWS(ctx), nil, errUnauthenticatedWS
		}
		actor, expires, err := a.Authenticate(ctx, token)
		if err != nil {
			return rejectWS(ctx), nil, errUnauthenticatedWS
		}
		if err := sockets.admit(ctx, actor); err != nil {
			return transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, err.Error()), closeTooMany), nil, err
		}
		ctx = auth.WithActor(ctx, actor)
		// The socket ends as soon as its credential stops authenticating or its role drops
		// (logged out, revoked, removed or demoted).
		{
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			stop := a.Watch(actor, token, cancel)
			onClose(ctx, func() { stop(); cancel() })
		}
		if !expires.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, expires)
			onClose(ctx, cancel)
		} else {
			// API keys do not expire, but can be revoked: check again now and then, and close the
			// socket once the key no longer authenticates.
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			go recheckCredential(ctx, cancel, a, token)
		}
		return ctx, nil, nil
	}
}

type wsError string

func (e wsError) Error() string { return string(e) }

const errUnauthenticatedWS = wsError("UNAUTHENTICATED: connection_init needs {\"authorization\": \"Bearer <token>\"} with a valid token")

// rejectWS makes the transport close a refused socket with 4403 (graphql-transport-ws's Forbidden)
// and the reason: that protocol has no message for connection errors, so without it the client
// would only see a normal closure.
func rejectWS(ctx context.Context) context.Context {
	return transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, string(errUnauthenticatedWS)), 4403)
}

// originHosts turns allowed origins (https://app.example.com) into the host patterns the
// WebSocket library matches; same-origin requests are always allowed.
func originHosts(origins []string) []string {
	var out []string
	for _, o := range origins {
		if o == "*" {
			out = append(out, "*")
			continue
		}
		if u, err := url.Parse(o); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	return out
}

// credentialRecheck is how often a WebSocket authenticated with an API key re-validates it.
const credentialRecheck = 30 * time.Second

func recheckCredential(ctx context.Context, cancel context.CancelFunc, a *auth.Service, token string) {
	t := time.NewTicker(credentialRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, _, err := a.Authenticate(ctx, token); auth.IsUnauthenticated(err) {
				cancel()
				return
			}
		}
	}
}
