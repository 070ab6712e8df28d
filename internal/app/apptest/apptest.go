// Package apptest runs a whole agentry process (API and workers) against a fresh database and
// the test Redis, behind an httptest server, with helpers to call GraphQL as a client would.
package apptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/app"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/jobs"
	"github.com/agentry/agentry/internal/mail"
	"github.com/agentry/agentry/internal/run"
)

// Env is one running agentry under test.
type Env struct {
	App      *app.App
	Server   *httptest.Server
	OwnerURL string // the database's owner connection (for inspecting tables)
	// Mail holds every email the process sent (verification, invitation and reset links).
	Mail *mail.Outbox
}

// Options change the process under test.
type Options struct {
	Env    map[string]string // extra environment (config names)
	NoWork bool              // do not start River workers
	LogTo  io.Writer         // default: discarded unless AGENTRY_TEST_LOG=1
	// DatabaseURL, when set, is the (migrated) database to use instead of a fresh one, e.g. to
	// share one database between several processes under test.
	DatabaseURL string
	// TracerProvider, when set, traces the process (an in-memory exporter's provider).
	TracerProvider trace.TracerProvider
}

// Start runs agentry for t and stops it when t ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	ownerURL := o.DatabaseURL
	if ownerURL == "" {
		ownerURL = dbtest.URL(t)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := map[string]string{
		"DATABASE_URL":       dbtest.PoolURL(ownerURL),
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(key),
		"AGENTRY_ENV":        "development",
		"AGENTRY_HTTP_ADDR":  "127.0.0.1:0",
		// Each test has its own Redis namespace, so parallel tests never see each other's events.
		"AGENTRY_REDIS_PREFIX":     fmt.Sprintf("test%d-%d:", time.Now().UnixNano(), seq.Add(1)),
		"AGENTRY_RETRY_BASE_DELAY": "50ms",
		// Tests drive the API far faster than a plan allows; rate-limit tests turn them back on.
		"AGENTRY_RATE_LIMIT_SPEND":  "off",
		"AGENTRY_RATE_LIMIT_AUTH":   "off",
		"AGENTRY_RATE_LIMIT_CREATE": "off",
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		env["REDIS_URL"] = u
	}
	for k, v := range o.Env {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	logTo := o.LogTo
	if logTo == nil {
		logTo = io.Discard
		if os.Getenv("AGENTRY_TEST_LOG") == "1" {
			logTo = os.Stderr
		}
	}
	log := app.NewLogger(logTo, false, slog.LevelDebug)
	ctx := context.Background()
	outbox := mail.NewOutbox()
	appOpts := []app.Option{app.WithMail(outbox)}
	if o.TracerProvider != nil {
		appOpts = append(appOpts, app.WithTracerProvider(o.TracerProvider))
	}
	a, err := app.New(ctx, cfg, log, app.Mode{API: true, Work: !o.NoWork}, appOpts...)
	require.NoError(t, err)
	if !o.NoWork {
		require.NoError(t, jobs.Start(ctx, a.River, log))
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		if !o.NoWork {
			// Running jobs are cancelled at once (River waits 10 s at most for them to end).
			stopCtx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = a.StopWork(stopCtx, 10*time.Second)
		}
		a.Close()
	})
	return &Env{App: a, Server: srv, OwnerURL: ownerURL, Mail: outbox}
}

var linkToken = regexp.MustCompile(`[?&]token=([^\s&]+)`)

// LinkToken waits for the n-th (from 1) email to the address to whose subject contains subject
// and returns the token of the link in it.
func (e *Env) LinkToken(t testing.TB, to, subject string, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := e.Mail.Wait(ctx, to, subject, n)
	require.NoError(t, err)
	match := linkToken.FindStringSubmatch(m.Text)
	require.NotNil(t, match, "no link with a token in %q", m.Text)
	token, err := url.QueryUnescape(match[1])
	require.NoError(t, err)
	return token
}

// VerifyEmail opens the verification link sent to the address (the first one) as its owner
// would.
func (e *Env) VerifyEmail(t testing.TB, email string) {
	t.Helper()
	token := e.LinkToken(t, email, "Verify your email", 1)
	res := e.Do(t, "", `mutation($t: String!) { verifyEmail(token: $t) }`, map[string]any{"t": token})
	require.Empty(t, res.Errors, "verifyEmail: %s", res.Body)
}

// Jobs lists the River jobs of kind in states (every state when none), oldest first, through
// River's client.
func (e *Env) Jobs(t testing.TB, kind string, states ...rivertype.JobState) []*rivertype.JobRow {
	t.Helper()
	p := river.NewJobListParams().Kinds(kind).First(10_000)
	if len(states) > 0 {
		p = p.States(states...)
	}
	res, err := e.App.River.JobList(context.Background(), p)
	require.NoError(t, err)
	return res.Jobs
}

// JobOfRun returns the River job of run runID, the newest when the run had several (a reap, a
// resume), or nil.
func (e *Env) JobOfRun(t testing.TB, runID uuid.UUID) *rivertype.JobRow {
	t.Helper()
	var out *rivertype.JobRow
	for _, j := range e.Jobs(t, run.Args{}.Kind()) {
		var args run.Args
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &args))
		if args.RunID == runID {
			out = j
		}
	}
	return out
}

// GQLError is one GraphQL error.
type GQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Response is a GraphQL answer.
type Response struct {
	Status int
	Data   json.RawMessage `json:"data"`
	Errors []GQLError      `json:"errors"`
	Body   []byte
}

// Code returns the first error's extensions.code ("" when there is no error).
func (r *Response) Code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// Decode unmarshals data into v, failing t when the answer had errors.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	require.Empty(t, r.Errors, "GraphQL errors: %s", r.Body)
	require.NoError(t, json.Unmarshal(r.Data, v), "data: %s", r.Data)
}

// Do posts a GraphQL operation with an optional bearer token.
func (e *Env) Do(t testing.TB, token, query string, vars map[string]any) *Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.Server.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return e.send(t, req)
}

func (e *Env) send(t testing.TB, req *http.Request) *Response {
	t.Helper()
	res, err := e.Server.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := &Response{Status: res.StatusCode, Body: raw}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(t, json.Unmarshal(raw, out), "body: %s", raw)
	}
	return out
}

// Raw sends req to the server (for tests of the transport itself).
func (e *Env) Raw(t testing.TB, req *http.Request) *Response { return e.send(t, req) }

// Session is a signed-up user's credentials and ids.
type Session struct {
	AccessToken  string
	RefreshToken string
	UserID       string // global id
	TenantID     string // global id
	Email        string
	Password     string
}

var seq atomic.Int64

// SignUp creates a user with a new tenant and verifies their email through the link sent to
// it. Empty email makes a unique one.
func (e *Env) SignUp(t testing.TB, email, tenantName string) Session {
	t.Helper()
	if email == "" {
		email = fmt.Sprintf("user%d-%d@example.com", time.Now().UnixNano(), seq.Add(1))
	}
	if tenantName == "" {
		tenantName = "Tenant of " + email
	}
	const password = "correct horse battery staple"
	res := e.Do(t, "", `mutation($in: SignUpInput!) { signUp(input: $in) {
		accessToken refreshToken viewer { user { id } tenant { id } } } }`,
		map[string]any{"in": map[string]any{"email": email, "password": password, "tenantName": tenantName}})
	var out struct {
		SignUp struct {
			AccessToken, RefreshToken string
			Viewer                    struct {
				User   struct{ ID string }
				Tenant struct{ ID string }
			}
		}
	}
	res.Decode(t, &out)
	e.VerifyEmail(t, email)
	return Session{
		AccessToken: out.SignUp.AccessToken, RefreshToken: out.SignUp.RefreshToken,
		UserID: out.SignUp.Viewer.User.ID, TenantID: out.SignUp.Viewer.Tenant.ID,
		Email: email, Password: password,
	}
}
