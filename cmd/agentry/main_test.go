package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db/dbtest"
)

const shutdownTimeout = 3 * time.Second

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func masterKey() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// testEnv is the environment of a serving process on databaseURL.
func testEnv(t *testing.T, databaseURL string) map[string]string {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL":             dbtest.PoolURL(databaseURL),
		"AGENTRY_ENV":              "production",
		"AGENTRY_MASTER_KEY":       masterKey(),
		"AGENTRY_HTTP_ADDR":        freeAddr(t),
		"AGENTRY_HEALTH_ADDR":      freeAddr(t),
		"AGENTRY_SHUTDOWN_TIMEOUT": shutdownTimeout.String(),
		// Nothing listens there: these processes send no mail that a test reads.
		"AGENTRY_SMTP_URL": "smtp://127.0.0.1:1",
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		env["REDIS_URL"] = u
	}
	return env
}

// freshDB creates an empty (not migrated) database, dropped when t ends, and returns its URL.
func freshDB(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbtest.ServerURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "agentry_cmdtest_" + hex.EncodeToString(b)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbtest.ServerURL())
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(dbtest.ServerURL())
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

func queryInt(t *testing.T, databaseURL, sql string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n), "%s", sql)
	return n
}

// riverState reports, through River's public API on databaseURL, how many of River's
// migrations are applied, whether its schema is complete, and how many jobs of kind (every kind
// when empty) are in states (every state when none).
func riverState(t *testing.T, databaseURL, kind string, states ...rivertype.JobState) (migrations int, migrated bool, jobs int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, databaseURL)
	require.NoError(t, err)
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	versions, err := migrator.ExistingVersions(ctx)
	require.NoError(t, err)
	valid, err := migrator.Validate(ctx, nil)
	require.NoError(t, err)
	if !valid.OK {
		return len(versions), false, 0
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	p := river.NewJobListParams().First(10_000)
	if kind != "" {
		p = p.Kinds(kind)
	}
	if len(states) > 0 {
		p = p.States(states...)
	}
	res, err := client.JobList(ctx, p)
	require.NoError(t, err)
	return len(versions), true, len(res.Jobs)
}

// process is run() going in a goroutine.
type process struct {
	cancel context.CancelFunc
	done   chan error
	stdout *syncBuffer
	stderr *syncBuffer
	addr   string // the API's
	health string // /livez, /readyz and /metrics
}

func start(t *testing.T, env map[string]string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{cancel: cancel, done: make(chan error, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{}, addr: env["AGENTRY_HTTP_ADDR"], health: env["AGENTRY_HEALTH_ADDR"]}
	go func() { p.done <- run(ctx, args, getenv(env), p.stdout, p.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-p.done:
			if err != nil {
				t.Logf("%v ended: %v", args, err)
			}
		case <-time.After(shutdownTimeout + 10*time.Second):
			t.Errorf("%v did not stop", args)
		}
		if t.Failed() {
			t.Logf("%v stderr:\n%s", args, p.stderr.String())
		}
	})
	return p
}

// waitReady polls /readyz on the health address until it answers 200.
func (p *process) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("process exited before it was ready: %v\nstderr:\n%s", err, p.stderr.String())
		default:
		}
		res, err := client.Get("http://" + p.health + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s/readyz never answered 200\nstderr:\n%s", p.health, p.stderr.String())
}

// stop cancels the process's context and requires run to return nil within the shutdown
// timeout plus a margin.
func (p *process) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		require.NoError(t, err, "stderr:\n%s", p.stderr.String())
		p.done <- nil // for the cleanup
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatalf("run did not return within %s of cancellation\nstderr:\n%s", shutdownTimeout+5*time.Second, p.stderr.String())
	}
}

// graphql posts an operation to the process and returns data, failing on errors.
func (p *process) graphql(t *testing.T, token, query string, vars map[string]any, out any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var resp struct {
		Data   json.RawMessage
		Errors []json.RawMessage
	}
	require.NoError(t, json.Unmarshal(raw, &resp), "%s", raw)
	require.Empty(t, resp.Errors, "%s", raw)
	require.NoError(t, json.Unmarshal(resp.Data, out), "%s", raw)
}

func (p *process) signUp(t *testing.T, email string) (accessToken string) {
	t.Helper()
	var out struct {
		SignUp struct{ AccessToken string }
	}
	p.graphql(t, "", `mutation($in: SignUpInput!) { signUp(input: $in) { accessToken } }`,
		map[string]any{"in": map[string]any{"email": email, "password": "correct horse battery staple", "tenantName": "Acme"}}, &out)
	require.NotEmpty(t, out.SignUp.AccessToken)
	return out.SignUp.AccessToken
}

func TestHelpAndBadInvocations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, args := range [][]string{nil, {"help"}, {"-h"}, {"--help"}} {
		var out bytes.Buffer
		// help needs no valid configuration.
		require.NoError(t, run(ctx, args, getenv(map[string]string{"AGENTRY_ENV": "bogus"}), &out, io.Discard), "%v", args)
		for _, cmd := range []string{"agentry dev", "agentry serve", "agentry worker", "agentry migrate", "agentry admin grant EMAIL"} {
			require.Contains(t, out.String(), cmd, "%v", args)
		}
	}

	var out bytes.Buffer
	err := run(ctx, []string{"frobnicate"}, getenv(nil), &out, io.Discard)
	require.Error(t, err)
	require.Contains(t, err.Error(), `"frobnicate"`)
	require.Empty(t, out.String())

	for _, tc := range []struct{ name, value string }{
		{"AGENTRY_ENV", "staging"},
		{"DATABASE_URL", "not a url"},
		{"AGENTRY_RETRY_BASE_DELAY", "abc"},
	} {
		err := run(ctx, []string{"serve"}, getenv(map[string]string{tc.name: tc.value}), io.Discard, io.Discard)
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.name)
	}

	for _, args := range [][]string{{"admin"}, {"admin", "grant"}, {"admin", "promote", "a@example.com"}} {
		err := run(ctx, args, getenv(nil), io.Discard, io.Discard)
		require.ErrorContains(t, err, "usage: agentry admin grant|revoke EMAIL", "%v", args)
	}
}

func TestMigrateFreshDatabaseIsIdempotent(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := map[string]string{"DATABASE_URL": dbURL}

	var log1 syncBuffer
	require.NoError(t, run(ctx, []string{"migrate"}, getenv(env), io.Discard, &log1), "%s", log1.String())
	gooseRows := queryInt(t, dbURL, "SELECT count(*) FROM goose_db_version")
	riverRows, migrated, _ := riverState(t, dbURL, "")
	tables := queryInt(t, dbURL, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
	require.Greater(t, gooseRows, 1)
	require.Positive(t, riverRows)
	require.True(t, migrated, "River's schema is complete")
	require.Equal(t, 1, queryInt(t, dbURL, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'refresh_tokens'"))
	require.Contains(t, log1.String(), "applied migration")

	var log2 syncBuffer
	require.NoError(t, run(ctx, []string{"migrate"}, getenv(env), io.Discard, &log2), "%s", log2.String())
	require.Equal(t, gooseRows, queryInt(t, dbURL, "SELECT count(*) FROM goose_db_version"))
	again, _, _ := riverState(t, dbURL, "")
	require.Equal(t, riverRows, again)
	require.Equal(t, tables, queryInt(t, dbURL, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
	require.NotContains(t, log2.String(), "applied", "a second migrate applies nothing")
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := map[string]string{"DATABASE_URL": dbURL}

	migrateAll := func(n int) {
		t.Helper()
		errs := make(chan error, n)
		for range n {
			go func() { errs <- run(ctx, []string{"migrate"}, getenv(env), io.Discard, io.Discard) }()
		}
		for range n {
			require.NoError(t, <-errs)
		}
	}
	migrateAll(2)
	gooseRows := queryInt(t, dbURL, "SELECT count(*) FROM goose_db_version")
	riverRows, _, _ := riverState(t, dbURL, "")
	require.NoError(t, run(ctx, []string{"migrate"}, getenv(env), io.Discard, io.Discard))
	require.Equal(t, gooseRows, queryInt(t, dbURL, "SELECT count(*) FROM goose_db_version"))
	again, migrated, _ := riverState(t, dbURL, "")
	require.Equal(t, riverRows, again)
	require.True(t, migrated, "River's schema is complete")

	// Only River's migrations pending (as after a River upgrade): goose has nothing to do, so
	// its lock alone would not keep the processes from migrating River at the same time.
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
	pool.Close()
	require.NoError(t, err)
	require.Zero(t, queryInt(t, dbURL, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'river%'"))
	migrateAll(3)
	again, _, _ = riverState(t, dbURL, "")
	require.Equal(t, riverRows, again)
}

func TestServeRefusesProductionWithoutMasterKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cmd := range []string{"serve", "worker"} {
		env := map[string]string{"AGENTRY_ENV": "production", "AGENTRY_HTTP_ADDR": freeAddr(t)}
		err := run(ctx, []string{cmd}, getenv(env), io.Discard, io.Discard)
		require.Error(t, err, cmd)
		require.Contains(t, err.Error(), "AGENTRY_MASTER_KEY", cmd)
	}
}

// TestServeRefusesProductionWithoutMailServer: in production, serve and worker stop at start
// without AGENTRY_SMTP_URL (nobody could verify an address, accept an invitation or reset a
// password), with a message naming it.
func TestServeRefusesProductionWithoutMailServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cmd := range []string{"serve", "worker"} {
		env := map[string]string{"AGENTRY_ENV": "production", "AGENTRY_MASTER_KEY": masterKey(), "AGENTRY_HTTP_ADDR": freeAddr(t)}
		err := run(ctx, []string{cmd}, getenv(env), io.Discard, io.Discard)
		require.Error(t, err, cmd)
		require.Contains(t, err.Error(), "AGENTRY_SMTP_URL", cmd)
	}
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.URL(t))
	p := start(t, env, "serve")
	p.waitReady(t)

	// The API process serves /graphql; /metrics only on its health address.
	token := p.signUp(t, "grace@example.com")
	status, metrics := get(t, "http://"+p.health+"/metrics")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, metrics, "go_goroutines")
	_, public := get(t, "http://"+p.addr+"/metrics")
	require.NotContains(t, public, "go_goroutines", "the public listener answers with metrics")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	defer ws.CloseNow()
	require.Equal(t, "graphql-transport-ws", ws.Subprotocol())

	type msg struct {
		Type    string          `json:"type"`
		ID      string          `json:"id,omitempty"`
		Payload json.RawMessage `json:"payload,omitempty"`
	}
	send := func(m any) {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, ws.Write(ctx, websocket.MessageText, b))
	}
	msgs := make(chan msg, 16)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				readErr <- err
				close(msgs)
				return
			}
			var m msg
			if json.Unmarshal(b, &m) == nil && m.Type != "ping" && m.Type != "pong" {
				msgs <- m
			}
		}
	}()
	next := func() msg {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("socket closed early: %v", <-readErr)
			}
			return m
		case <-ctx.Done():
			t.Fatal("no WebSocket message")
			return msg{}
		}
	}

	send(map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}})
	require.Equal(t, "connection_ack", next().Type)
	send(map[string]any{"type": "subscribe", "id": "1", "payload": map[string]any{"query": "{ viewer { user { email } } }"}})
	m := next()
	require.Equal(t, "next", m.Type, "%s", m.Payload)
	require.Contains(t, string(m.Payload), "grace@example.com")
	require.Equal(t, "complete", next().Type)

	// The socket is open; shutting down closes it and run returns nil in time.
	select {
	case err := <-readErr:
		t.Fatalf("socket closed before shutdown: %v", err)
	default:
	}
	began := time.Now()
	p.stop(t)
	require.Less(t, time.Since(began), shutdownTimeout+time.Second, "an open WebSocket must not hold the shutdown for the whole timeout")
	select {
	case err := <-readErr:
		require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "close: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the WebSocket was not closed by the shutdown")
	}

	// Nothing listens any more.
	for _, addr := range []string{p.addr, p.health} {
		_, err = net.DialTimeout("tcp", addr, time.Second)
		require.Error(t, err, addr)
	}
}

// get GETs url and returns the status code and the body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	status, _ := get(t, url)
	return status
}

func TestWorkerShutsDownGracefully(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t)
	env := testEnv(t, dbURL)
	p := start(t, env, "worker")
	p.waitReady(t)

	// A worker serves health and metrics on its health address, and no API anywhere.
	require.Equal(t, http.StatusNotFound, getStatus(t, "http://"+p.health+"/graphql"))
	require.Equal(t, http.StatusOK, getStatus(t, "http://"+p.health+"/metrics"))
	_, err := net.DialTimeout("tcp", p.addr, time.Second)
	require.Error(t, err, "a worker listens on AGENTRY_HTTP_ADDR")

	// River is working: the periodic purge runs on start.
	deadline := time.Now().Add(15 * time.Second)
	for _, _, n := riverState(t, dbURL, "refresh_token_purge", rivertype.JobStateCompleted); n == 0; _, _, n = riverState(t, dbURL, "refresh_token_purge", rivertype.JobStateCompleted) {
		require.True(t, time.Now().Before(deadline), "the purge job never completed\nstderr:\n%s", p.stderr.String())
		time.Sleep(100 * time.Millisecond)
	}
	p.stop(t)
	require.Contains(t, p.stderr.String(), "stopped")

	// Restart on the same database, then stop again: nothing is left running.
	env["AGENTRY_HEALTH_ADDR"] = freeAddr(t)
	p2 := start(t, env, "worker")
	p2.waitReady(t)
	p2.stop(t)
	_, _, running := riverState(t, dbURL, "", rivertype.JobStateRunning)
	require.Zero(t, running)
}

func TestAdminGrant(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t)
	env := testEnv(t, dbURL)
	p := start(t, env, "serve")
	p.waitReady(t)
	p.signUp(t, "Root@Example.com")
	p.stop(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	isAdmin := func() int {
		return queryInt(t, dbURL, "SELECT count(*) FROM users WHERE lower(email) = 'root@example.com' AND is_platform_admin")
	}
	require.Zero(t, isAdmin())

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"admin", "grant", "root@example.com"}, getenv(env), &out, io.Discard))
	require.Contains(t, out.String(), "Root@Example.com is now a platform admin")
	require.Equal(t, 1, isAdmin())

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "revoke", "  ROOT@example.com "}, getenv(env), &out, io.Discard))
	require.Contains(t, out.String(), "is no longer a platform admin")
	require.Zero(t, isAdmin())

	out.Reset()
	err := run(ctx, []string{"admin", "grant", "nobody@example.com"}, getenv(env), &out, io.Discard)
	require.Error(t, err)
	require.Contains(t, err.Error(), "nobody@example.com")
	require.Empty(t, out.String())
}

// Not parallel: t.Chdir.
func TestDevRefusesProduction(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := map[string]string{"AGENTRY_ENV": "production", "AGENTRY_MASTER_KEY": masterKey(), "AGENTRY_HTTP_ADDR": freeAddr(t)}
	err := run(ctx, []string{"dev"}, getenv(env), io.Discard, io.Discard)
	require.Error(t, err)
	require.Contains(t, err.Error(), "AGENTRY_ENV=development")
	_, statErr := os.Stat(filepath.Join(dir, ".data"))
	require.True(t, errors.Is(statErr, os.ErrNotExist), "dev in production must not make a development key")
}

// Not parallel: t.Chdir. dev makes a development master key on first use and reuses it.
func TestDevMakesAndReusesMasterKey(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	env := testEnv(t, dbtest.URL(t))
	env["AGENTRY_ENV"] = "development"
	delete(env, "AGENTRY_MASTER_KEY")

	p := start(t, env, "dev")
	p.waitReady(t)
	p.signUp(t, "dev@example.com")
	p.stop(t)
	require.Contains(t, p.stderr.String(), "GENERATED A DEVELOPMENT MASTER KEY")
	keyPath := filepath.Join(dir, ".data", "dev-master-key")
	fi, err := os.Stat(keyPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	raw, err := os.ReadFile(keyPath)
	require.NoError(t, err)

	// The second run reads the same key: the signing key sealed with it still opens.
	env["AGENTRY_HTTP_ADDR"], env["AGENTRY_HEALTH_ADDR"] = freeAddr(t), freeAddr(t)
	p2 := start(t, env, "dev")
	p2.waitReady(t)
	p2.signUp(t, "dev2@example.com")
	p2.stop(t)
	require.Contains(t, p2.stderr.String(), "DEVELOPMENT MASTER KEY in use")
	again, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	require.Equal(t, raw, again)
	require.NotContains(t, p2.stderr.String(), strings.TrimSpace(string(raw)), "the key itself is never logged")
}
