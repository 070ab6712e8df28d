package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/app"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/jobs"
	"github.com/agentry/agentry/internal/mail"
)

// env is one bench run's world: a fresh database, the fake LLM, a whole agentry process (API
// and workers) behind a loopback HTTP server, and the clients that talk to it.
type env struct {
	o       Options
	dbName  string
	adminDB string // URL of the server's maintenance database (create/drop)
	dbURL   string // URL of the bench database (owner)
	llm     *FakeLLM
	app     *app.App
	srv     *http.Server
	baseURL string
	gql     *gqlClient
	owner   *pgxpool.Pool // owner connections to the bench database (statistics, checks)
	rdb     *redis.Client // the bench's own Redis connection (INFO)
	logs    *logTail
	// lastBreakdown is where the time of the last E2E round's turns went.
	lastBreakdown map[string]float64
	// vacuum is set when the server runs without autovacuum: the bench then does its work
	// itself before each round (see maintain).
	vacuum bool
	// redisHook counts the commands agentry's Redis client sends.
	redisHook *commandCounter
	// sessions are the bench tenants' users (one tenant each), every tenant with a budget (far
	// above what the bench spends) so budgets are enforced. BUDGET compares two groups of its
	// own that no other measure touches, so both sides start with the same (empty) history:
	// budgeted, with such budgets, and plain, without any (the enforcement-off side). A tenant
	// with thousands of earlier turns runs slower turns than a fresh one, which would otherwise
	// be charged to enforcement.
	sessions, budgeted, plain []session
}

// newDatabaseName returns a unique name for the run's database.
func newDatabaseName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("agentry_bench_%d_%s", time.Now().Unix(), hex.EncodeToString(b))
}

// withDatabase returns raw (a Postgres URL) naming database name instead.
func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// withoutPoolParams drops pgxpool's own parameters (pool_max_conns...), which a single
// connection refuses.
func withoutPoolParams(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// setUp creates and migrates the database, starts the fake LLM and agentry, and signs up the
// bench tenants.
func setUp(ctx context.Context, o Options) (_ *env, err error) {
	e := &env{o: o, dbName: newDatabaseName(), logs: &logTail{}}
	defer func() {
		if err != nil {
			e.tearDown()
		}
	}()
	if e.adminDB, err = withDatabase(withoutPoolParams(o.DatabaseURL), "postgres"); err != nil {
		return e, err
	}
	if e.dbURL, err = withDatabase(o.DatabaseURL, e.dbName); err != nil {
		return e, err
	}
	conn, err := pgx.Connect(ctx, e.adminDB)
	if err != nil {
		return e, fmt.Errorf("connect to Postgres (DATABASE_URL's server): %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{e.dbName}.Sanitize())
	_ = conn.Close(ctx)
	if err != nil {
		e.dbName = "" // nothing to drop
		return e, fmt.Errorf("create bench database: %w", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	if err := db.Migrate(ctx, withoutPoolParams(e.dbURL), quiet); err != nil {
		return e, fmt.Errorf("migrate bench database: %w", err)
	}
	if e.owner, err = pgxpool.New(ctx, e.dbURL); err != nil {
		return e, err
	}
	on, err := db.AutovacuumOn(ctx, e.owner)
	if err != nil {
		return e, fmt.Errorf("read autovacuum: %w", err)
	}
	e.vacuum = !on
	if o.LogStatements {
		// Diagnostics: the server logs every statement run on the bench database (only), with
		// its duration.
		if _, err := e.owner.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{e.dbName}.Sanitize()+" SET log_min_duration_statement = 0"); err != nil {
			return e, err
		}
	}
	ropts, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		return e, fmt.Errorf("REDIS_URL: %w", err)
	}
	e.rdb = redis.NewClient(ropts)
	if err := e.rdb.Ping(ctx).Err(); err != nil {
		return e, fmt.Errorf("connect to Redis (REDIS_URL): %w", err)
	}
	if e.llm, err = StartFakeLLM(); err != nil {
		return e, err
	}

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	vars := map[string]string{
		"DATABASE_URL":             e.dbURL,
		"REDIS_URL":                o.RedisURL,
		"AGENTRY_REDIS_PREFIX":     "bench-" + e.dbName + ":",
		"AGENTRY_MASTER_KEY":       base64.StdEncoding.EncodeToString(key),
		"AGENTRY_ENV":              "production",
		"AGENTRY_HTTP_ADDR":        "127.0.0.1:0",
		"OPENAI_BASE_URL":          e.llm.URL,
		"OPENAI_API_KEY":           "bench",
		"AGENTRY_DEFAULT_MODEL":    "openai:bench-t20",
		"AGENTRY_ACCESS_TOKEN_TTL": "3h",
		// The limiter runs on every mutation, as in production, with limits the bench never
		// reaches (an operator sizing them for this load).
		"AGENTRY_RATE_LIMIT_SPEND":  "1000000/s burst 1000000",
		"AGENTRY_RATE_LIMIT_AUTH":   "1000/s burst 1000",
		"AGENTRY_RATE_LIMIT_CREATE": "1000000/s burst 1000000",
		// FANOUT's subscribers are one user's sockets; a tenant's conversations are watched
		// through one socket.
		"AGENTRY_WS_MAX_SOCKETS_PER_USER": "100000",
		"AGENTRY_WS_MAX_SUBSCRIPTIONS":    "100000",
	}
	for k, v := range o.AppEnv {
		vars[k] = v
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		return e, err
	}
	// Production logging (JSON at info), kept only when it says something went wrong.
	log := app.NewLogger(e.logs, true, slog.LevelInfo)
	// Nobody reads the bench's mail (the verification links of its sign-ups): a sender that
	// drops it, which production mode needs in place of AGENTRY_SMTP_URL.
	if e.app, err = app.New(ctx, cfg, log, app.Mode{API: true, Work: true}, app.WithMail(mail.Discard{})); err != nil {
		return e, err
	}
	e.redisHook = &commandCounter{}
	e.app.Redis.AddHook(e.redisHook)
	if err := jobs.Start(context.WithoutCancel(ctx), e.app.River, log); err != nil {
		return e, fmt.Errorf("start River: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return e, err
	}
	e.srv = &http.Server{Handler: e.app.Handler, ReadHeaderTimeout: 10 * time.Second}
	if e.app.CloseSockets != nil {
		e.srv.RegisterOnShutdown(e.app.CloseSockets)
	}
	go func() { _ = e.srv.Serve(ln) }()
	e.baseURL = "http://" + ln.Addr().String()
	e.gql = &gqlClient{url: e.baseURL + "/graphql", hc: newHTTPClient(256)}

	// Tenants sign up two at a time (argon2id hashing is bounded per process).
	all := make([]session, 3*o.Tenants)
	var wg sync.WaitGroup
	errs := make([]error, len(all))
	sem := make(chan struct{}, 2)
	for i := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			all[i], errs[i] = e.gql.signUp(ctx, fmt.Sprintf("bench%d@%s.example.com", i, strings.ReplaceAll(e.dbName, "_", "-")))
			if errs[i] == nil && (i < o.Tenants || i >= 2*o.Tenants) {
				errs[i] = e.gql.setBudget(ctx, all[i])
			}
		}()
	}
	wg.Wait()
	e.sessions, e.plain, e.budgeted = all[:o.Tenants], all[o.Tenants:2*o.Tenants], all[2*o.Tenants:]
	return e, errors.Join(errs...)
}

// tearDown stops everything and drops the database.
func (e *env) tearDown() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if e.llm != nil {
		e.llm.Release()
	}
	if e.srv != nil {
		_ = e.srv.Shutdown(ctx)
	}
	if e.app != nil {
		if e.app.River != nil {
			stopCtx, c := context.WithTimeout(ctx, 10*time.Second)
			_ = e.app.StopWork(stopCtx, 10*time.Second)
			c()
		}
		e.app.Close()
	}
	if e.llm != nil {
		e.llm.Close()
	}
	if e.owner != nil {
		e.owner.Close()
	}
	if e.rdb != nil {
		if e.app != nil && e.app.Config.RedisPrefix != "" {
			// Nothing is stored under the prefix today (pub/sub only); clean up if that changes.
			iter := e.rdb.Scan(ctx, 0, e.app.Config.RedisPrefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				e.rdb.Del(ctx, iter.Val())
			}
		}
		_ = e.rdb.Close()
	}
	if e.dbName != "" && e.adminDB != "" {
		if conn, err := pgx.Connect(ctx, e.adminDB); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{e.dbName}.Sanitize()+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
	}
}

// conversations creates n conversations on model, spread over the (budgeted) tenants round
// robin.
func (e *env) conversations(ctx context.Context, n int, model string) ([]conversation, error) {
	return e.conversationsOf(ctx, e.sessions, n, model)
}

// conversationsOf creates n conversations on model, spread over sessions round robin.
func (e *env) conversationsOf(ctx context.Context, sessions []session, n int, model string) ([]conversation, error) {
	out := make([]conversation, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s := sessions[i%len(sessions)]
			id, err := e.gql.createConversation(ctx, s, "openai:"+model)
			out[i], errs[i] = conversation{id: id, s: s, tenant: i % len(sessions)}, err
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// conversation is one conversation of a bench tenant.
type conversation struct {
	id     string
	s      session
	tenant int
}

// logTail keeps the last warnings and errors agentry logged (its info lines are dropped).
type logTail struct {
	mu    sync.Mutex
	lines []string
	n     int
}

func (l *logTail) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte(`"level":"WARN"`)) && !bytes.Contains(p, []byte(`"level":"ERROR"`)) {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.lines) < 20 {
		l.lines = append(l.lines, strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// report writes how many warnings and errors agentry logged, and the first few.
func (l *logTail) report(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return
	}
	fmt.Fprintf(w, "\nagentry logged %d warnings or errors during the bench; the first:\n", l.n)
	for _, s := range l.lines {
		if len(s) > 400 {
			s = s[:400] + "..."
		}
		fmt.Fprintln(w, "  "+s)
	}
}

// maintain does, when the server runs without autovacuum, what autovacuum would do now: it
// vacuums (and analyzes) every table of the bench database whose dead rows passed autovacuum's
// default threshold (50 + 20% of its rows), and analyzes those whose changes since the last
// analyze passed 50 + 10%. The database grows from empty to some hundred thousand rows within
// a run; never analyzed, the plans connections cached while it was small stay (River's
// completer's among them, which then reads its whole job table per batch), and analyzed once
// while small, the same happens later. It runs between rounds, outside the measured windows.
func (e *env) maintain(ctx context.Context) error {
	if !e.vacuum {
		return nil
	}
	start := time.Now()
	rows, err := e.owner.Query(ctx, `
		SELECT format('%I.%I', s.schemaname, s.relname),
		       s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0),
		       s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)
		FROM pg_stat_user_tables s
		JOIN pg_class c ON c.oid = s.relid
		ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("tables to vacuum: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Name          string
		Dead, Changed bool
	}])
	if err != nil {
		return fmt.Errorf("tables to vacuum: %w", err)
	}
	var vacuum, analyze []string
	for _, t := range tables {
		switch {
		case t.Dead:
			vacuum = append(vacuum, t.Name)
		case t.Changed:
			analyze = append(analyze, t.Name)
		}
	}
	for _, t := range vacuum {
		if _, err := e.owner.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return fmt.Errorf("VACUUM (ANALYZE) %s (the server runs without autovacuum): %w", t, err)
		}
	}
	for _, t := range analyze {
		if _, err := e.owner.Exec(ctx, "ANALYZE "+t); err != nil {
			return fmt.Errorf("ANALYZE %s (the server runs without autovacuum): %w", t, err)
		}
	}
	if len(vacuum)+len(analyze) > 0 {
		progress(e.o.Progress, "autovacuum's work (the server runs without it): %d tables vacuumed, %d more analyzed, in %s",
			len(vacuum), len(analyze), time.Since(start).Round(time.Millisecond))
	}
	return nil
}
