// Package app is agentry's composition root: configuration in, connection pools, services, the
// HTTP handler and the River client out.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/trace"
	"riverqueue.com/riverui"

	"github.com/agentry/agentry/graph"
	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/chat"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
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
	"github.com/agentry/agentry/internal/server"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/subagent"
	"github.com/agentry/agentry/internal/task"
	"github.com/agentry/agentry/internal/team"
	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/internal/tenancy"
	"github.com/agentry/agentry/internal/tool"
	"github.com/agentry/agentry/internal/usage"
	"github.com/agentry/agentry/internal/webhook"
	"github.com/agentry/agentry/internal/workspace"
	"github.com/agentry/agentry/web"
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
	// Tracer is the tracer provider (nil: tracing off); stopTracing flushes an exporter's.
	Tracer      trace.TracerProvider
	stopTracing func(context.Context) error
	// mail is the sender WithMail gave; nil: the configured one (mailSender).
	mail mail.Sender
}

// JobsUIPrefix is where the River UI is mounted (platform admins only).
const JobsUIPrefix = "/admin/jobs"

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
	var err error
	if a.Tracer == nil {
		if a.Tracer, a.stopTracing, err = telemetry.Setup(ctx, os.Getenv, "agentry"); err != nil {
			return nil, err
		}
	}
	var dbOpts []db.Option
	if a.Tracer != nil {
		dbOpts = append(dbOpts, db.WithTracer(otelpgx.NewTracer(otelpgx.WithTracerProvider(a.Tracer))))
	}
	if a.DB, err = db.Open(ctx, cfg.DatabaseURL, cfg.DBRole, log, dbOpts...); err != nil {
		return nil, err
	}
	if err := a.DB.Pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect to Postgres (DATABASE_URL): %w", err)
	}
	if on, err := db.AutovacuumOn(ctx, a.DB.Pool); err == nil && !on {
		log.Warn("Postgres runs with autovacuum off: tables are never analyzed, and queries planned while a table was small (River's job table among them) stay slow as it grows; turn autovacuum on, or run VACUUM (ANALYZE) regularly")
	}
	if a.Queue, err = db.OpenQueue(ctx, cfg.DatabaseURL, cfg.DBRole, log, dbOpts...); err != nil {
		return nil, err
	}
	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	a.Redis = redis.NewClient(ropts)
	if a.Tracer != nil {
		if err := redisotel.InstrumentTracing(a.Redis, redisotel.WithTracerProvider(a.Tracer)); err != nil {
			return nil, fmt.Errorf("trace Redis: %w", err)
		}
	}
	if err := a.Redis.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("connect to Redis (REDIS_URL): %w", err)
	}

	keys, err := auth.NewKeys(ctx, a.DB, cfg.MasterKey, log)
	if err != nil {
		return nil, err
	}
	a.Auth = auth.NewService(a.DB, auth.NewPasswords(cfg.PasswordHashLimit), auth.NewTokens(keys, cfg.JWTIssuer, cfg.JWTAudience, cfg.AccessTokenTTL, nil), log)
	a.Tenancy = tenancy.NewService(a.DB)
	if a.mail == nil {
		if a.mail, err = mailSender(cfg, log); err != nil {
			return nil, err
		}
	}
	a.Auth.Mail, a.Auth.PublicURL = a.mail, cfg.PublicURL
	a.Tenancy.Mail, a.Tenancy.PublicURL, a.Tenancy.Log = a.mail, cfg.PublicURL, log
	// A member's role change or removal reaches their open credentials at once.
	a.Tenancy.OnMemberChange = func(tenantID, userID uuid.UUID) { a.Auth.Changed(context.Background(), tenantID, userID) }
	a.Settings = settings.NewService(a.DB)
	a.Auth.OnSignUp = chat.CreateDefaultProject

	pub := events.NewPublisher(a.Redis, cfg.RedisPrefix, log)
	pub.SetMetrics(a.Metrics)
	a.Runs = run.NewService(a.DB, pub, log)
	a.Runs.SetMetrics(a.Metrics)
	a.Approvals = approval.NewService(a.DB, a.Runs, cfg.ApprovalTTL, log)
	pcfg := providerConfig(cfg)
	a.Models = providers.New(pcfg)
	defModels := models{a.Models, providers.DefaultModel(pcfg)}
	a.Chat = chat.NewService(a.DB, a.Runs, defModels, log)
	a.Tasks = task.NewService(a.DB, a.Runs, defModels, log)
	a.Usage = usage.NewService(a.DB, a.Runs, log)
	a.Usage.SetMetrics(a.Metrics)
	a.Usage.SetRunawayFactor(cfg.CostRunawayFactor)
	a.Chat.SetAdmission(a.Usage)
	a.Tasks.SetAdmission(a.Usage)
	a.RateLimits = ratelimit.New(ratelimit.Options{
		Redis: a.Redis, Prefix: cfg.RedisPrefix, DB: a.DB, Spend: cfg.RateLimitSpend, Auth: cfg.RateLimitAuth, Create: cfg.RateLimitCreate,
		Account: cfg.RateLimitAccount, Log: log,
	})
	a.RateLimits.SetMetrics(a.Metrics)
	a.Tools = tool.NewRegistry()
	for _, t := range tool.MemoryTools() {
		if err := a.Tools.Register(t); err != nil {
			return nil, err
		}
	}
	for _, t := range routine.Tools() {
		if err := a.Tools.Register(t); err != nil {
			return nil, err
		}
	}
	a.Memory = memory.NewService(a.DB)
	a.Context = contextwin.New(contextwin.Options{Models: a.Models, SummaryModel: cfg.SummaryModel, Log: log})
	a.Executor = agent.New(a.DB, a.Runs, a.Models, agent.RegistryTools{Registry: a.Tools}, log)
	a.Executor.SetContextWindow(a.Context)
	a.Executor.SetMetrics(a.Metrics)
	if a.Tracer != nil {
		a.Executor.SetTracer(a.Tracer)
	}
	taskHooks := task.Hooks{}
	a.Executor.Register(run.KindTask, taskHooks)
	a.Workspace = workspace.NewService(a.DB, &workspace.Store{}, a.Runs, a.Approvals)
	a.Approvals.OnExpire(workspace.KindRollback, a.Workspace.RollbackExpired)
	a.Runs.OnFinish(run.KindTask, func(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
		if err := taskHooks.Finished(ctx, tx, fin); err != nil {
			return err
		}
		return a.Workspace.Finished(ctx, tx, fin)
	})
	a.Runs.OnFinish(run.KindChatTurn, a.Workspace.Finished)
	a.Subagents = subagent.NewService(a.DB, a.Runs, a.Tools, subagent.Limits{Platform: cfg.SubagentsPlatformMax}, log)
	a.Subagents.SetAdmission(a.Usage)
	a.Subagents.SetApprovals(a.Approvals)
	a.Approvals.OnDecision(approval.KindSubagent, a.Subagents.Decided)
	a.Approvals.OnExpire(approval.KindSubagent, a.Subagents.Expired)
	for _, t := range a.Subagents.Tools() {
		if err := a.Tools.Register(t); err != nil {
			return nil, err
		}
	}
	a.Executor.Register(subagent.KindSubagent, a.Subagents)
	a.Executor.SetWaiter(a.Subagents)
	a.Runs.OnFinish(subagent.KindSubagent, func(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
		if err := a.Subagents.Finished(ctx, tx, fin); err != nil {
			return err
		}
		return a.Workspace.Finished(ctx, tx, fin)
	})
	a.Routines = routine.NewService(a.DB, a.Runs, routineModels{defModels}, a.Tools.Names, log)
	a.Routines.SetAdmission(a.Usage)
	a.Executor.Register(run.KindRoutine, a.Routines.Hooks())
	a.Executor.Restrict(routine.GateVerdictTool, routine.CronSignalTool)
	a.Runs.OnFinish(run.KindRoutine, func(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
		if err := a.Workspace.Finished(ctx, tx, fin); err != nil {
			return err
		}
		return a.Routines.StepRunFinished(ctx, tx, fin)
	})
	a.Runs.OnCancel(run.KindRoutine, a.Routines.Cancelled)
	a.Runs.OnEnqueue(run.KindRoutine, a.Routines.Enqueued)
	a.Tasks.OnReady(a.Routines.TaskReady)
	// Team runs: the TEAM run moves through its phases' runs (kind TEAM_PHASE).
	a.Teams = team.NewService(a.DB, a.Runs, a.Approvals, a.Workspace, defModels, log)
	a.Teams.SetAdmission(a.Usage)
	a.Executor.Register(team.KindPhase, team.NewHooks())
	a.Runs.OnFinish(team.KindPhase, a.Teams.PhaseFinished)
	a.Runs.OnFinish(run.KindTeam, a.Teams.Finished)
	a.Runs.OnEnqueue(run.KindTeam, func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (bool, error) {
		return true, a.Teams.Continue(ctx, tx, r)
	})
	a.Approvals.OnDecision(approval.KindTeamBlocked, a.Teams.Decided)
	a.Approvals.OnExpire(approval.KindTeamBlocked, a.Teams.Expired)
	a.Executor.SetRetryBase(cfg.RetryBaseDelay)
	a.Executor.SetApprovals(agent.ServiceApprovals{Service: a.Approvals})
	a.Executor.SetBudgets(team.NewBudgets(a.Runs, a.Usage))
	a.Webhooks = webhook.NewService(webhook.Options{
		DB: a.DB, Sealer: keys, Log: log, Production: !cfg.IsDevelopment(), RetryBase: cfg.WebhookRetryBase, Metrics: a.Metrics,
	})
	pub.SetTap(a.Webhooks.Dispatch)
	host, _ := os.Hostname()
	var middleware []rivertype.Middleware
	if a.Tracer != nil {
		// The trace context goes into each job's metadata and comes back around its work,
		// outside River's otel middleware, whose work span thus joins the enqueuer's trace.
		middleware = []rivertype.Middleware{&telemetry.JobMiddleware{}, otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			TracerProvider: a.Tracer, EnableWorkSpanJobKindSuffix: true,
		})}
	}
	if a.River, err = jobs.NewClient(a.DB, jobs.Options{
		Middleware: middleware,
		Work:       mode.Work, Concurrency: cfg.WorkerConcurrency, Log: log, Executor: a.Executor,
		RetryBaseDelay: cfg.RetryBaseDelay, Owner: fmt.Sprintf("%s/%d", host, os.Getpid()), Runs: a.Runs, Queue: a.Queue, Metrics: a.Metrics,
		Queues: map[string]river.QueueConfig{webhook.Queue: {MaxWorkers: 10}},
		Register: func(w *river.Workers) []*river.PeriodicJob {
			river.AddWorker(w, approval.NewExpireWorker(a.Approvals))
			river.AddWorker(w, webhook.NewWorker(a.Webhooks))
			periodic := append([]*river.PeriodicJob{approval.ExpirePeriodicJob()}, a.Usage.Register(w)...)
			periodic = append(periodic, a.Subagents.Register(w)...)
			periodic = append(periodic, a.Routines.Register(w)...)
			return append(periodic, a.Workspace.Register(w, cfg.WorkspaceRetention)...)
		},
	}); err != nil {
		return nil, err
	}
	a.Runs.SetInserter(a.River)
	a.Subagents.SetInserter(a.River)
	a.Routines.SetInserter(a.River)
	a.Webhooks.SetInserter(a.River)

	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), poolCollector{a.DB, a.Redis},
		stateCollector{river: a.River, db: a.DB, log: log})
	opts := server.Options{
		Log:            log,
		Registry:       a.Registry,
		Ready:          a.readiness(mode),
		MaxBodyBytes:   cfg.MaxBodyBytes,
		AllowedOrigins: cfg.AllowedOrigins,
		Tracing:        a.Tracer != nil,
	}
	if mode.API {
		var listen context.Context
		listen, a.stopListening = context.WithCancel(context.Background())
		if err := a.Auth.ListenForChanges(listen, a.Redis, cfg.RedisPrefix); err != nil {
			return nil, err
		}
		a.Hub = events.NewHub(a.Redis, cfg.RedisPrefix, log)
		// Runs worked here reach this process's subscribers without the trip through Redis.
		pub.DeliverLocally(a.Hub)
		opts.Auth = a.Auth
		var sockets context.Context
		sockets, a.CloseSockets = context.WithCancel(context.Background())
		opts.GraphQL = graph.NewHandler(graph.HandlerOptions{
			Resolver: &graph.Resolver{
				Auth: a.Auth, Tenancy: a.Tenancy, Settings: a.Settings, Chat: a.Chat, RunService: a.Runs, Tasks: a.Tasks, Teams: a.Teams, Approvals: a.Approvals, Hub: a.Hub, Memory: a.Memory,
				Usage: a.Usage, RateLimits: a.RateLimits, Workspaces: a.Workspace, Subagents: a.Subagents, RoutineService: a.Routines, Webhooks: a.Webhooks, Health: a.HealthChecks(), Log: log,
			},
			Development:    cfg.IsDevelopment(),
			AllowedOrigins: cfg.AllowedOrigins,
			Limits: graph.Limits{
				WSInitTimeout: cfg.WSInitTimeout, WSSubscriptions: cfg.WSMaxSubscriptions, WSSocketsPerUser: cfg.WSMaxSocketsPerUser,
			},
			Sockets: sockets,
			Metrics: a.Metrics,
			Tracer:  a.Tracer,
		})
		opts.Web = web.Handler()
		if opts.AdminJobs, err = a.jobsUI(log); err != nil {
			return nil, err
		}
	}
	a.Handler = server.New(opts)
	a.Health = server.Health(opts)
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
// them and waits at most hard more.
func (a *App) StopWork(ctx context.Context, hard time.Duration) error {
	err := a.River.Stop(ctx)
	if err != nil {
		hardCtx, cancel := context.WithTimeout(context.Background(), hard)
		defer cancel()
		err = a.River.StopAndCancel(hardCtx)
	}
	return err
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

// poolCollector exports Postgres and Redis pool statistics.
type poolCollector struct {
	db    *db.DB
	redis *redis.Client
}

var (
	pgConns     = prometheus.NewDesc("agentry_pg_pool_connections", "Postgres pool connections by state.", []string{"state"}, nil)
	pgAcquires  = prometheus.NewDesc("agentry_pg_pool_acquires_total", "Postgres pool acquisitions.", nil, nil)
	pgWaits     = prometheus.NewDesc("agentry_pg_pool_empty_acquires_total", "Acquisitions that waited for a connection.", nil, nil)
	pgWaitSecs  = prometheus.NewDesc("agentry_pg_pool_acquire_wait_seconds_total", "Time spent waiting for connections.", nil, nil)
	redisConns  = prometheus.NewDesc("agentry_redis_pool_connections", "Redis pool connections by state.", []string{"state"}, nil)
	redisMisses = prometheus.NewDesc("agentry_redis_pool_misses_total", "Redis pool misses (new connections).", nil, nil)
	redisWaits  = prometheus.NewDesc("agentry_redis_pool_timeouts_total", "Redis pool wait timeouts.", nil, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pgConns, pgAcquires, pgWaits, pgWaitSecs, redisConns, redisMisses, redisWaits} {
		ch <- d
	}
}

func (p poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := p.db.Pool.Stat()
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(s.MaxConns()), "max")
	ch <- prometheus.MustNewConstMetric(pgAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(pgWaits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(pgWaitSecs, prometheus.CounterValue, s.AcquireDuration().Seconds())
	r := p.redis.PoolStats()
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.TotalConns-r.IdleConns), "in_use")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(redisMisses, prometheus.CounterValue, float64(r.Misses))
	ch <- prometheus.MustNewConstMetric(redisWaits, prometheus.CounterValue, float64(r.Timeouts))
}

// models is the model registry with the configured default model.
type models struct {
	*llm.Registry
	def string
}

func (m models) Default() string { return m.def }

// routineModels checks a role's model reference.
type routineModels struct{ models }

func (m routineModels) Resolve(ref string) error {
	_, _, err := m.models.Resolve(ref)
	return err
}

// providerConfig is what the model registry needs of cfg.
func providerConfig(cfg *config.Config) providers.Config {
	return providers.Config{
		AnthropicAPIKey: cfg.AnthropicAPIKey, AnthropicBaseURL: cfg.AnthropicBaseURL,
		OpenAIAPIKey: cfg.OpenAIAPIKey, OpenAIBaseURL: cfg.OpenAIBaseURL,
		DefaultModel: cfg.DefaultModel, SummaryModel: cfg.SummaryModel, Development: cfg.IsDevelopment(),
		// The demo streams at a readable pace, so `agentry tail` shows tokens arriving.
		DemoWordDelay: 20 * time.Millisecond,
	}
}
