// Command agentry is the one agentry binary: API server, workers, migrations and operator tools.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/agentry/agentry/internal/app"
	"github.com/agentry/agentry/internal/bench"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/extract"
	"github.com/agentry/agentry/internal/jobs"
	"github.com/agentry/agentry/internal/tenancy"
)

const usage = `agentry: a multi-tenant backend for running LLM agents.

Usage:
  agentry dev                 migrate, then serve the API and work jobs in one process (laptops)
  agentry serve               serve the API (/graphql, web app) on AGENTRY_HTTP_ADDR; inserts jobs only
  agentry worker              work River jobs; no API
                              (every process serves /livez, /readyz and /metrics on AGENTRY_HEALTH_ADDR)
  agentry migrate             apply app and River migrations (idempotent)
  agentry admin grant EMAIL   make a user a platform admin (admin revoke EMAIL undoes it)
  agentry tail --run ID       stream a run's events (replay, then live) to the terminal
  agentry bench [--quick]     measure overhead against baselines on a fresh database (--json, --only, --profile)

Configuration comes from the environment; see README.md.
`

// gcPercent is the collector's heap growth when GOGC sets none: twice Go's default. What a
// turn and a delivered event allocate dies young, and with half as many collections a process
// fanning events out to WebSockets delivers more of them on the same CPU (docs/PERFORMANCE.md).
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agentry:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		_, _ = io.WriteString(stdout, usage)
		return nil
	}
	if args[0] == "tail" {
		return tail(ctx, args[1:], getenv, stdout)
	}
	if args[0] == "extract" {
		// Hidden: the attachment reader's child process (internal/extract), started by the
		// server itself; by hand it reads gob-encoded files from stdin.
		if code := extract.Main(args[1:], os.Stdin, stdout, stderr); code != 0 {
			return fmt.Errorf("extract: exit status %d", code)
		}
		return nil
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if getenv("AGENTRY_LOG_LEVEL") == "debug" {
		level = slog.LevelDebug
	}
	log := app.NewLogger(stderr, !cfg.IsDevelopment(), level)

	switch args[0] {
	case "migrate":
		return db.Migrate(ctx, cfg.DatabaseURL, log)
	case "serve", "worker":
		if err := devDefaults(cfg, stderr); err != nil {
			return err
		}
		if err := app.Check(cfg); err != nil {
			return err
		}
		if err := db.CheckMigrated(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		return serve(ctx, cfg, log, app.Mode{API: args[0] == "serve", Work: args[0] == "worker"})
	case "dev":
		if !cfg.IsDevelopment() {
			return errors.New("agentry dev runs only with AGENTRY_ENV=development; use serve and worker")
		}
		if err := devDefaults(cfg, stderr); err != nil {
			return err
		}
		if err := db.Migrate(ctx, cfg.DatabaseURL, log); err != nil {
			return err
		}
		return serve(ctx, cfg, log, app.Mode{API: true, Work: true})
	case "bench":
		return bench.Main(ctx, args[1:], cfg.DatabaseURL, cfg.RedisURL, stdout, stderr)
	case "admin":
		return admin(ctx, cfg, log, args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q\n\n%s", args[0], usage)
}

// devDefaults fills in what development runs without: a master key, the one kept in
// .data/dev-master-key (made on first use). Outside development it changes nothing (Validate
// then asks for AGENTRY_MASTER_KEY).
func devDefaults(cfg *config.Config, stderr io.Writer) error {
	if !cfg.IsDevelopment() || len(cfg.MasterKey) > 0 {
		return nil
	}
	key, err := devMasterKey(stderr)
	if err != nil {
		return fmt.Errorf("development master key (or set AGENTRY_MASTER_KEY): %w", err)
	}
	cfg.MasterKey = key
	return nil
}

// devMasterKey returns the development master key kept in .data/dev-master-key, making it on
// first use. It says so loudly: such a key is for laptops only. Processes starting together
// (make serve and make worker) agree on one key: a new key is written aside and linked into
// place, so the first link wins and the others read it.
func devMasterKey(stderr io.Writer) ([]byte, error) {
	path := filepath.Join(".data", "dev-master-key")
	if key, err := readDevKey(path); err == nil {
		fmt.Fprintf(stderr, "\n*** DEVELOPMENT MASTER KEY in use (%s). Never use it in production: set AGENTRY_MASTER_KEY. ***\n\n", path)
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(".data", 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(".data", "dev-master-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return devMasterKey(stderr) // another process made it first
	} else if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "\n*** GENERATED A DEVELOPMENT MASTER KEY in %s. It encrypts signing keys on this laptop only; never use it in production: set AGENTRY_MASTER_KEY. ***\n\n", path)
	return key, nil
}

func readDevKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := config.ParseMasterKey(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// serve runs the process until ctx ends: the API on AGENTRY_HTTP_ADDR (mode.API), River
// (mode.Work), and /livez, /readyz and /metrics on the health address. Then it shuts down
// gracefully: stop accepting, finish in-flight requests, close WebSockets, soft-stop River
// (running jobs get the shutdown timeout to finish, then are cancelled).
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, mode app.Mode) error {
	a, err := app.New(ctx, cfg, log, mode)
	if err != nil {
		return err
	}
	defer a.Close()

	type listener struct {
		name string // the variable naming its address
		ln   net.Listener
		srv  *http.Server
	}
	var listeners []listener
	defer func() {
		for _, l := range listeners {
			_ = l.ln.Close()
		}
	}()
	listen := func(name, addr string, h http.Handler) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s=%s: %w", name, addr, err)
		}
		listeners = append(listeners, listener{name, ln, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}})
		return nil
	}
	if mode.API {
		if err := listen("AGENTRY_HTTP_ADDR", cfg.HTTPAddr, a.Handler); err != nil {
			return err
		}
		// Hijacked connections (WebSockets) are not tracked by Shutdown: close them explicitly,
		// while ordinary in-flight requests finish.
		if a.CloseSockets != nil {
			listeners[0].srv.RegisterOnShutdown(a.CloseSockets)
		}
	}
	if err := listen("AGENTRY_HEALTH_ADDR", cfg.HealthAddrFor(mode.API), a.Health); err != nil {
		return err
	}
	if mode.Work {
		// Not ctx itself: cancelling Start's context is River's hard stop (running jobs are
		// cancelled at once); shutdown below soft-stops first.
		if err := jobs.Start(context.WithoutCancel(ctx), a.River, log); err != nil {
			return fmt.Errorf("start River: %w", err)
		}
	}
	attrs := []any{slog.Bool("api", mode.API), slog.Bool("worker", mode.Work), slog.String("env", string(cfg.Env))}
	for _, l := range listeners {
		attrs = append(attrs, slog.String(strings.ToLower(strings.TrimPrefix(l.name, "AGENTRY_")), l.ln.Addr().String()))
	}
	log.InfoContext(ctx, "agentry listening", attrs...)
	srvErr := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { srvErr <- l.srv.Serve(l.ln) }()
	}

	select {
	case err := <-srvErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", slog.Duration("timeout", cfg.ShutdownTimeout))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, l := range listeners {
		if err := l.srv.Shutdown(shutdownCtx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown (%s): %w", l.name, err))
		}
	}
	if mode.Work {
		if err := a.StopWork(shutdownCtx, 5*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop work: %w", err))
		}
	}
	log.Info("stopped")
	return errors.Join(errs...)
}

func admin(ctx context.Context, cfg *config.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 2 || (args[0] != "grant" && args[0] != "revoke") {
		return errors.New("usage: agentry admin grant|revoke EMAIL")
	}
	d, err := db.Open(ctx, cfg.DatabaseURL, cfg.DBRole, log)
	if err != nil {
		return err
	}
	defer d.Close()
	u, err := tenancy.NewService(d).GrantPlatformAdmin(ctx, args[1], args[0] == "grant")
	if err != nil {
		return err
	}
	verb := map[string]string{"grant": "is now", "revoke": "is no longer"}[args[0]]
	fmt.Fprintf(stdout, "%s %s a platform admin (takes effect at their next login or token refresh)\n", strings.TrimSpace(u.Email), verb)
	return nil
}
