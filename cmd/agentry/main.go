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
  agentry serve               serve the API (/graphql, web app, health, metrics); inserts jobs only
  agentry worker              work River jobs; serves only /livez, /readyz and /metrics
  agentry migrate             apply app and River migrations (idempotent)
  agentry admin grant EMAIL   make a user a platform admin (admin revoke EMAIL undoes it)
  agentry tail --run ID       stream a run's events (replay, then live) to the terminal
  agentry bench [--quick]     measure overhead against baselines on a fresh database (--json, --only, --profile)

Configuration comes from the environment; see README.md.
`

func main() {
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
	case "serve":
		return serve(ctx, cfg, log, app.Mode{API: true})
	case "worker":
		return serve(ctx, cfg, log, app.Mode{Work: true})
	case "dev":
		if !cfg.IsDevelopment() {
			return errors.New("agentry dev runs only with AGENTRY_ENV=development; use serve and worker")
		}
		if len(cfg.MasterKey) == 0 {
			if cfg.MasterKey, err = devMasterKey(stderr); err != nil {
				return err
			}
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

// devMasterKey returns the development master key kept in .data/dev-master-key, making it on
// first use. It says so loudly: such a key is for laptops only.
func devMasterKey(stderr io.Writer) ([]byte, error) {
	path := filepath.Join(".data", "dev-master-key")
	if raw, err := os.ReadFile(path); err == nil {
		key, err := config.ParseMasterKey(string(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(stderr, "\n*** DEVELOPMENT MASTER KEY in use (%s). Never use it in production: set AGENTRY_MASTER_KEY. ***\n\n", path)
		return key, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(".data", 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "\n*** GENERATED A DEVELOPMENT MASTER KEY in %s. It encrypts signing keys on this laptop only; never use it in production: set AGENTRY_MASTER_KEY. ***\n\n", path)
	return key, nil
}

// serve runs the HTTP server and, in work mode, River, until ctx ends; then it shuts down
// gracefully: stop accepting, finish in-flight requests, close WebSockets, soft-stop River
// (running jobs get the shutdown timeout to finish, then are cancelled).
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, mode app.Mode) error {
	a, err := app.New(ctx, cfg, log, mode)
	if err != nil {
		return err
	}
	defer a.Close()

	srv := &http.Server{
		Addr:              cfg.HTTPAddr,
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	// Hijacked connections (WebSockets) are not tracked by Shutdown: close them explicitly, while
	// ordinary in-flight requests finish.
	if a.CloseSockets != nil {
		srv.RegisterOnShutdown(a.CloseSockets)
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on AGENTRY_HTTP_ADDR=%s: %w", cfg.HTTPAddr, err)
	}
	if mode.Work {
		// Not ctx itself: cancelling Start's context is River's hard stop (running jobs are
		// cancelled at once); shutdown below soft-stops first.
		if err := jobs.Start(context.WithoutCancel(ctx), a.River, log); err != nil {
			return fmt.Errorf("start River: %w", err)
		}
	}
	log.InfoContext(ctx, "agentry listening", slog.String("addr", ln.Addr().String()), slog.Bool("api", mode.API), slog.Bool("worker", mode.Work), slog.String("env", string(cfg.Env)))
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()

	select {
	case err := <-srvErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", slog.Duration("timeout", cfg.ShutdownTimeout))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(shutdownCtx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
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
