package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/google/uuid"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"

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
	"github.com/agentry/agentry/internal/jobs"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/providers"
	"github.com/agentry/agentry/internal/memory"
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

// connect opens the tracer (unless an option gave one), Postgres's pools and Redis, each
// checked with a ping.
func (a *App) connect(ctx context.Context) error {
	cfg, log := a.Config, a.Log
	var err error
	if a.Tracer == nil {
		if a.Tracer, a.stopTracing, err = telemetry.Setup(ctx, os.Getenv, "agentry"); err != nil {
			return err
		}
	}
	var dbOpts []db.Option
	if a.Tracer != nil {
		dbOpts = append(dbOpts, db.WithTracer(otelpgx.NewTracer(otelpgx.WithTracerProvider(a.Tracer))))
	}
	if a.DB, err = db.Open(ctx, cfg.DatabaseURL, cfg.DBRole, log, dbOpts...); err != nil {
		return err
	}
	if err := a.DB.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("connect to Postgres (DATABASE_URL): %w", err)
	}
	if on, err := db.AutovacuumOn(ctx, a.DB.Pool); err == nil && !on {
		log.Warn("Postgres runs with autovacuum off: tables are never analyzed, and queries planned while a table was small (River's job table among them) stay slow as it grows; turn autovacuum on, or run VACUUM (ANALYZE) regularly")
	}
	if a.Queue, err = db.OpenQueue(ctx, cfg.DatabaseURL, cfg.DBRole, log, dbOpts...); err != nil {
		return err
	}
	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	a.Redis = redis.NewClient(ropts)
	if a.Tracer != nil {
		if err := redisotel.InstrumentTracing(a.Redis, redisotel.WithTracerProvider(a.Tracer)); err != nil {
			return fmt.Errorf("trace Redis: %w", err)
		}
	}
	if err := a.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to Redis (REDIS_URL): %w", err)
	}
	return nil
}

// identity builds accounts and tenants (auth, tenancy, their mail) and the users' settings.
func (a *App) identity(keys *auth.Keys) error {
	cfg := a.Config
	a.Auth = auth.NewService(a.DB, auth.NewPasswords(cfg.PasswordHashLimit), auth.NewTokens(keys, cfg.JWTIssuer, cfg.JWTAudience, cfg.AccessTokenTTL, nil), a.Log)
	a.Tenancy = tenancy.NewService(a.DB)
	if a.mail == nil {
		var err error
		if a.mail, err = mailSender(cfg, a.Log); err != nil {
			return err
		}
	}
	a.Auth.Mail, a.Auth.PublicURL = a.mail, cfg.PublicURL
	a.Tenancy.Mail, a.Tenancy.PublicURL, a.Tenancy.Log = a.mail, cfg.PublicURL, a.Log
	// A member's role change or removal reaches their open credentials at once.
	a.Tenancy.OnMemberChange = func(tenantID, userID uuid.UUID) { a.Auth.Changed(context.Background(), tenantID, userID) }
	a.Settings = settings.NewService(a.DB)
	a.Auth.OnSignUp = chat.CreateDefaultProject
	return nil
}

// services builds the domain services around runs (events go out through pub) and the tools.
func (a *App) services(pub *events.Publisher) error {
	cfg, log := a.Config, a.Log
	a.Runs = run.NewService(a.DB, pub, log, run.WithMetrics(a.Metrics), run.WithCancelSignal(jobs.CancelSignal(a.Redis, cfg.RedisPrefix, log)))
	a.Approvals = approval.NewService(a.DB, a.Runs, cfg.ApprovalTTL, log)
	pcfg := providerConfig(cfg)
	a.Models = providers.New(pcfg)
	a.defModels = models{a.Models, providers.DefaultModel(pcfg)}
	a.Usage = usage.NewService(a.DB, a.Runs, log, usage.WithMetrics(a.Metrics), usage.WithRunawayFactor(cfg.CostRunawayFactor))
	a.Chat = chat.NewService(a.DB, a.Runs, a.defModels, log, chat.WithAdmission(a.Usage))
	a.Tasks = task.NewService(a.DB, a.Runs, a.defModels, log, task.WithAdmission(a.Usage))
	a.RateLimits = ratelimit.New(ratelimit.Options{
		Redis: a.Redis, Prefix: cfg.RedisPrefix, DB: a.DB, Spend: cfg.RateLimitSpend, Auth: cfg.RateLimitAuth, Create: cfg.RateLimitCreate,
		Account: cfg.RateLimitAccount, Log: log, Metrics: a.Metrics,
	})
	a.Tenancy.OnPlanChange = a.RateLimits.ForgetPlans
	a.Tools = tool.NewRegistry()
	if err := register(a.Tools, tool.MemoryTools(), routine.Tools()); err != nil {
		return err
	}
	a.Memory = memory.NewService(a.DB)
	a.Context = contextwin.New(contextwin.Options{Models: a.Models, SummaryModel: cfg.SummaryModel, Log: log})
	a.Workspace = workspace.NewService(a.DB, &workspace.Store{}, a.Runs, a.Approvals)
	a.Approvals.OnExpire(workspace.KindRollback, a.Workspace.RollbackExpired)
	a.Subagents = subagent.NewService(a.DB, a.Runs, a.Tools, subagent.Limits{Platform: cfg.SubagentsPlatformMax}, log,
		subagent.WithAdmission(a.Usage), subagent.WithApprovals(a.Approvals))
	a.Approvals.OnDecision(approval.KindSubagent, a.Subagents.Decided)
	a.Approvals.OnExpire(approval.KindSubagent, a.Subagents.Expired)
	if err := register(a.Tools, a.Subagents.Tools()); err != nil {
		return err
	}
	a.Routines = routine.NewService(a.DB, a.Runs, routineModels{a.defModels}, a.Tools.Names, log, routine.WithAdmission(a.Usage))
	a.Teams = team.NewService(a.DB, a.Runs, a.Approvals, a.Workspace, a.defModels, log, team.WithAdmission(a.Usage))
	return nil
}

// register adds tools to reg.
func register(reg *tool.Registry, sets ...[]tool.Tool) error {
	for _, set := range sets {
		for _, t := range set {
			if err := reg.Register(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// runKinds builds the executor and wires each kind of run into it and into the run service:
// what a kind's start, end, cancel and enqueue do.
func (a *App) runKinds() {
	execOpts := []agent.Option{
		agent.WithContextWindow(a.Context), agent.WithMetrics(a.Metrics), agent.WithWaiter(a.Subagents),
		agent.WithRetryBase(a.Config.RetryBaseDelay), agent.WithApprovals(executorApprovals{svc: a.Approvals}),
		agent.WithBudgets(team.NewBudgets(a.Runs, a.Usage)),
	}
	if a.Tracer != nil {
		execOpts = append(execOpts, agent.WithTracer(a.Tracer))
	}
	a.Executor = agent.New(a.DB, a.Runs, a.Models, registryTools{reg: a.Tools}, a.Log, execOpts...)
	taskHooks := task.Hooks{}
	a.Executor.Register(run.KindTask, taskHooks)
	a.Runs.OnFinish(run.KindTask, func(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
		if err := taskHooks.Finished(ctx, tx, fin); err != nil {
			return err
		}
		return a.Workspace.Finished(ctx, tx, fin)
	})
	a.Runs.OnFinish(run.KindChatTurn, a.Workspace.Finished)
	a.Executor.Register(subagent.KindSubagent, a.Subagents)
	a.Runs.OnConversations(subagent.KindSubagent, a.Subagents.ParentConversation)
	a.Runs.OnFinish(subagent.KindSubagent, func(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
		if err := a.Subagents.Finished(ctx, tx, fin); err != nil {
			return err
		}
		return a.Workspace.Finished(ctx, tx, fin)
	})
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
	a.Executor.Register(team.KindPhase, team.NewHooks())
	a.Runs.OnFinish(team.KindPhase, a.Teams.PhaseFinished)
	a.Runs.OnFinish(run.KindTeam, a.Teams.Finished)
	a.Runs.OnWorkers(run.KindTeam, a.Teams.LockPhases)
	a.Runs.OnConversations(team.KindPhase, a.Teams.TeamConversation)
	a.Runs.OnEnqueue(run.KindTeam, func(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (bool, error) {
		return true, a.Teams.Continue(ctx, tx, r)
	})
	a.Approvals.OnDecision(approval.KindTeamBlocked, a.Teams.Decided)
	a.Approvals.OnExpire(approval.KindTeamBlocked, a.Teams.Expired)
}

// jobs builds the River client (working jobs when mode.Work) and gives it to the services that
// enqueue jobs.
func (a *App) jobs(mode Mode) error {
	cfg := a.Config
	host, _ := os.Hostname()
	var middleware []rivertype.Middleware
	if a.Tracer != nil {
		// The trace context goes into each job's metadata and comes back around its work,
		// outside River's otel middleware, whose work span thus joins the enqueuer's trace.
		middleware = []rivertype.Middleware{&telemetry.JobMiddleware{}, otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			TracerProvider: a.Tracer, EnableWorkSpanJobKindSuffix: true,
		})}
	}
	owner := fmt.Sprintf("%s/%d", host, os.Getpid())
	var err error
	if a.River, err = jobs.NewClient(a.DB, jobs.Options{
		Middleware: middleware,
		Work:       mode.Work, Concurrency: cfg.WorkerConcurrency, Log: a.Log, Executor: a.Executor,
		RetryBaseDelay: cfg.RetryBaseDelay, Owner: owner, Runs: a.Runs, Queue: a.Queue, Metrics: a.Metrics,
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
		return err
	}
	// The client is built from the workers, which need the services: they get it now.
	a.Runs.SetInserter(a.River)
	a.Subagents.SetInserter(a.River)
	a.Routines.SetInserter(a.River)
	a.Webhooks.SetInserter(a.River)
	if mode.API && mode.Work && cfg.LocalTurns > 0 {
		// This process works the chat turns it takes itself (AGENTRY_LOCAL_TURNS at once).
		local := jobs.NewLocal(jobs.LocalOptions{Executor: a.Executor, Owner: owner, Limit: cfg.LocalTurns,
			Log: a.Log, Metrics: a.Metrics, Tracer: a.Tracer})
		var listen context.Context
		listen, a.stopLocal = context.WithCancel(context.Background())
		if err := local.Listen(listen, a.Redis, cfg.RedisPrefix); err != nil {
			return fmt.Errorf("subscribe to run cancels: %w", err)
		}
		a.local = local
		a.Runs.SetLocal(local)
	}
	return nil
}

// serve builds the HTTP handlers: Handler (with /graphql, the web app and the jobs UI when
// mode.API) and Health.
func (a *App) serve(mode Mode, pub *events.Publisher) error {
	cfg, log := a.Config, a.Log
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
			return err
		}
		a.Hub = events.NewHub(a.Redis, cfg.RedisPrefix, log)
		// Runs worked here reach this process's subscribers without the trip through Redis.
		pub.DeliverLocally(a.Hub)
		opts.Auth = a.Auth
		opts.GraphQL = a.graphQL()
		opts.Web = web.Handler()
		var err error
		if opts.AdminJobs, err = a.jobsUI(log); err != nil {
			return err
		}
	}
	a.Handler = server.New(opts)
	a.Health = server.Health(opts)
	return nil
}

// graphQL is the /graphql handler over the services.
func (a *App) graphQL() http.Handler {
	cfg := a.Config
	var sockets context.Context
	sockets, a.CloseSockets = context.WithCancel(context.Background())
	return graph.NewHandler(graph.HandlerOptions{
		Resolver: &graph.Resolver{
			Auth: a.Auth, Tenancy: a.Tenancy, Settings: a.Settings, Chat: a.Chat, RunService: a.Runs, Tasks: a.Tasks, Teams: a.Teams, Approvals: a.Approvals, Hub: a.Hub, Memory: a.Memory,
			Usage: a.Usage, RateLimits: a.RateLimits, Workspaces: a.Workspace, Subagents: a.Subagents, RoutineService: a.Routines, Webhooks: a.Webhooks, Health: a.HealthChecks(), Log: a.Log,
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
