// Package app is agentry's composition root: configuration in, connection pools, services, the
// HTTP handler and the River client out.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"
	"riverqueue.com/riverui"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/chat"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/health"
	"github.com/agentry/agentry/internal/jobs"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/providers"
	"github.com/agentry/agentry/internal/mail"
	"github.com/agentry/agentry/internal/memory"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/ratelimit"
	"github.com/agentry/agentry/internal/routine"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/subagent"
	"github.com/agentry/agentry/internal/task"
	"github.com/agentry/agentry/internal/team"
	"github.com/agentry/agentry/internal/tenancy"
	"github.com/agentry/agentry/internal/tool"
	"github.com/agentry/agentry/internal/usage"
	"github.com/agentry/agentry/internal/webhook"
	"github.com/agentry/agentry/internal/workspace"
)

// Mode says which parts a process runs.
type Mode struct {
	API  bool // serve /graphql and the web app
	Work bool // work River jobs
}

// App is one running agentry process's parts.
type App struct {
	Config    *config.Config
	Log       *slog.Logger
	DB        *db.DB
	Queue     *db.DB // River's own statements (db.OpenQueue: asynchronous commit)
	Redis     *redis.Client
	River     *river.Client[pgx.Tx]
	Auth      *auth.Service
	Tenancy   *tenancy.Service
	Settings  *settings.Service
	Chat      *chat.Service
	Tasks     *task.Service
	Subagents *subagent.Service
	Teams     *team.Service
	Runs      *run.Service
	Approvals *approval.Service
	Hub       *events.Hub
	Models    *llm.Registry
	Executor  *agent.Executor
	Tools     *tool.Registry
	Context   *contextwin.Manager // the context window manager (tests override model limits through it)
	Memory    *memory.Service
	Usage     *usage.Service
	Workspace *workspace.Service // workspace history, snapshots and rollback
	Routines  *routine.Service   // roles, routines and routine runs
	Webhooks  *webhook.Service
	// RateLimits applies the GCRA limits of GraphQL mutations (tests point it at another Redis).
	RateLimits *ratelimit.Limiter
	Registry   *prometheus.Registry
	// Metrics are the domain metrics on Registry.
	Metrics *metrics.Metrics
	Handler http.Handler
	// Health serves /livez, /readyz and /metrics on the health address (AGENTRY_HEALTH_ADDR).
	Health http.Handler
	// CloseSockets closes every open WebSocket subscription (graceful shutdown).
	CloseSockets context.CancelFunc
	// stopListening ends the subscription to credential changes (auth.Service.ListenForChanges).
	stopListening context.CancelFunc
	// stopJobsUI stops the jobs UI's background services.
	stopJobsUI context.CancelFunc
	// local works the chat turns this process takes (a process that serves the API and works
	// jobs; nil otherwise); stopLocal ends its subscription to run cancels.
	local     *jobs.Local
	stopLocal context.CancelFunc
	// Tracer is the tracer provider (nil: tracing off); stopTracing flushes an exporter's.
	Tracer      trace.TracerProvider
	stopTracing func(context.Context) error
	// defModels is the model registry with the configured default model.
	defModels models
	// mail is the sender WithMail gave; nil: the configured one (mailSender).
	mail mail.Sender
}

// JobsUIPrefix is where the River UI is mounted (platform admins only).
const JobsUIPrefix = "/admin/jobs"

// Check returns the mistakes of cfg that New stops at before it connects anywhere: what
// Validate refuses, and configured models that cannot answer (a process whose model cannot
// answer stops at start instead of failing every run).
func Check(cfg *config.Config) error { return check(cfg, false) }

// check is Check for a process whose mail sender is given (mailGiven: WithMail), which then
// needs no AGENTRY_SMTP_URL.
func check(cfg *config.Config, mailGiven bool) error {
	if err := cfg.Validate(); err != nil && !(mailGiven && errors.Is(err, config.ErrNoMailServer)) {
		return err
	}
	pcfg := providerConfig(cfg)
	return providers.Check(pcfg, providers.New(pcfg))
}

// Option changes how New builds the process.
type Option func(*App)

// WithTracerProvider traces with tp (tests: an in-memory exporter) instead of what the OTEL_*
// variables configure.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(a *App) { a.Tracer = tp }
}

// WithMail makes s the sender of every email (verification, invitation, password reset) in
// place of the configured one; the process then needs no AGENTRY_SMTP_URL, even in production.
// For programs that embed agentry: tests read the links from an outbox, the bench discards them.
func WithMail(s mail.Sender) Option {
	return func(a *App) { a.mail = s }
}

// New connects to Postgres and Redis and builds the services. The caller starts River (when
// mode.Work) and serves Handler. Tracing is on when an option gives a tracer provider or
// OTEL_EXPORTER_OTLP_ENDPOINT is set; off, nothing is instrumented.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, mode Mode, options ...Option) (*App, error) {
	a := &App{Config: cfg, Log: log, Registry: prometheus.NewRegistry()}
	for _, o := range options {
		o(a)
	}
	if err := check(cfg, a.mail != nil); err != nil {
		return nil, err
	}
	a.Metrics = metrics.New(a.Registry)
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	keys, err := auth.NewKeys(ctx, a.DB, cfg.MasterKey, log)
	if err != nil {
		return nil, err
	}
	if err := a.identity(keys); err != nil {
		return nil, err
	}
	a.Webhooks = webhook.NewService(webhook.Options{
		DB: a.DB, Sealer: keys, Log: log, Production: !cfg.IsDevelopment(), RetryBase: cfg.WebhookRetryBase, Metrics: a.Metrics,
	})
	pub := events.NewPublisher(a.Redis, cfg.RedisPrefix, log, events.WithMetrics(a.Metrics), events.WithTap(a.Webhooks.Dispatch))
	if err := a.services(pub); err != nil {
		return nil, err
	}
	a.runKinds()
	if err := a.jobs(mode); err != nil {
		return nil, err
	}
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), poolCollector{a.DB, a.Redis},
		stateCollector{river: a.River, db: a.DB, log: log})
	if err := a.serve(mode, pub); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// mailSender is the configured sender: SMTP (AGENTRY_SMTP_URL); without it, in development,
// the log (Validate refuses production without it).
func mailSender(cfg *config.Config, log *slog.Logger) (mail.Sender, error) {
	if cfg.SMTPURL == "" {
		return mail.Log{Log: log}, nil
	}
	s, err := mail.ParseSMTPURL(cfg.SMTPURL)
	if err != nil {
		return nil, fmt.Errorf("AGENTRY_SMTP_URL: %w", err)
	}
	return s, nil
}

// HealthChecks are the checks of every dependency: Postgres, Redis and River's leader.
func (a *App) HealthChecks() []health.Check {
	return []health.Check{
		{Name: "postgres", Check: func(ctx context.Context) error { return a.DB.Pool.Ping(ctx) }},
		{Name: "redis", Check: func(ctx context.Context) error { return a.Redis.Ping(ctx).Err() }},
		{Name: "river_leader", Check: func(ctx context.Context) error { return jobs.CheckLeader(ctx, a.River) }},
	}
}

// readiness is what /readyz checks: every dependency for a process that works jobs; an API-only
// process does not check River's leader (with no worker running it can still answer, and its
// load balancer should keep sending it requests).
func (a *App) readiness(mode Mode) []health.Check {
	checks := a.HealthChecks()
	if !mode.Work {
		checks = checks[:2]
	}
	return checks
}

// StopWork stops working jobs: River lets running jobs finish until ctx ends, then cancels
// them and waits at most hard more. The chat turns this process works itself stop alike; each
// cancelled one is handed to River for its next attempt.
func (a *App) StopWork(ctx context.Context, hard time.Duration) error {
	var (
		wg       sync.WaitGroup
		localErr error
	)
	if a.local != nil {
		wg.Go(func() { localErr = a.local.Stop(ctx, hard) })
	}
	err := a.River.Stop(ctx)
	if err != nil {
		hardCtx, cancel := context.WithTimeout(context.Background(), hard)
		defer cancel()
		err = a.River.StopAndCancel(hardCtx)
	}
	wg.Wait()
	return errors.Join(err, localErr)
}

// Close releases the connections. River must have been stopped.
func (a *App) Close() {
	var errs []error
	if a.CloseSockets != nil {
		a.CloseSockets()
	}
	if a.stopListening != nil {
		a.stopListening()
	}
	if a.stopJobsUI != nil {
		a.stopJobsUI()
	}
	if a.stopLocal != nil {
		a.stopLocal()
	}
	if a.Hub != nil {
		errs = append(errs, a.Hub.Close())
	}
	if a.Usage != nil {
		a.Usage.StopAlerts()
	}
	if a.Runs != nil {
		// Events published before the stop go out before the Redis client closes.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs = append(errs, a.Runs.Publisher().Flush(ctx))
		cancel()
	}
	if a.Redis != nil {
		errs = append(errs, a.Redis.Close())
	}
	if a.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs = append(errs, a.stopTracing(ctx))
		cancel()
	}
	if a.DB != nil {
		a.DB.Close()
	}
	if a.Queue != nil {
		a.Queue.Close()
	}
	if err := errors.Join(errs...); err != nil {
		a.Log.Warn("close", slog.Any("error", err))
	}
}

// jobsUI returns River's UI and its API under JobsUIPrefix, started; server.New puts it behind
// the platform-admin check.
func (a *App) jobsUI(log *slog.Logger) (http.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(a.River, nil),
		Logger:    log.With(slog.String("component", "jobs_ui")),
		Prefix:    JobsUIPrefix,
		// Job args hold ids only, but a listing need not show them.
		JobListHideArgsByDefault: true,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs UI: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("start the jobs UI: %w", err)
	}
	a.stopJobsUI = cancel
	return h, nil
}
