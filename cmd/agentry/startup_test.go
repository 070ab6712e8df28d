package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// execSQL runs statements on the database at url.
func execSQL(t *testing.T, url string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	for _, s := range stmts {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
}

// TestStartupConfigurationMistakes: serve and worker stop at start, with a message saying what
// to do, on each configuration mistake: a model whose provider has no key, a demo model outside
// development or that does not exist, an unmigrated (or partly migrated) database, a bad or
// taken health address.
func TestStartupConfigurationMistakes(t *testing.T) {
	t.Parallel()
	migrated := dbtest.URL(t)
	behind := dbtest.URL(t)
	execSQL(t, behind, `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`)
	noRiver := dbtest.URL(t)
	riverDownOne(t, noRiver)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })

	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"default model without its key", map[string]string{"AGENTRY_DEFAULT_MODEL": "openai:gpt-4o"}, []string{"AGENTRY_DEFAULT_MODEL", "OPENAI_API_KEY"}},
		{"summary model without its key", map[string]string{"AGENTRY_SUMMARY_MODEL": "anthropic:claude-haiku-4-5"}, []string{"AGENTRY_SUMMARY_MODEL", "ANTHROPIC_API_KEY"}},
		{"demo model in production", map[string]string{"AGENTRY_DEFAULT_MODEL": "demo:demo"}, []string{"AGENTRY_DEFAULT_MODEL", "AGENTRY_ENV=development"}},
		{"demo model that does not exist", map[string]string{"AGENTRY_ENV": "development", "AGENTRY_DEFAULT_MODEL": "demo:gpt-5"}, []string{"AGENTRY_DEFAULT_MODEL", "demo:demo"}},
		{"unmigrated database", map[string]string{"DATABASE_URL": freshDB(t)}, []string{"none of agentry's tables", "run agentry migrate"}},
		{"database a migration behind", map[string]string{"DATABASE_URL": behind}, []string{"the database is at migration", "run agentry migrate"}},
		{"River's migrations behind", map[string]string{"DATABASE_URL": noRiver}, []string{"River", "run agentry migrate"}},
		{"malformed health address", map[string]string{"AGENTRY_HEALTH_ADDR": "nine-thousand"}, []string{"AGENTRY_HEALTH_ADDR", "host:port"}},
		{"health address taken", map[string]string{"AGENTRY_HEALTH_ADDR": taken.Addr().String()}, []string{"AGENTRY_HEALTH_ADDR=" + taken.Addr().String()}},
	} {
		for _, cmd := range []string{"serve", "worker"} {
			env := testEnv(t, migrated)
			for k, v := range tc.env {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := run(ctx, []string{cmd}, getenv(env), io.Discard, io.Discard)
			cancel()
			require.Error(t, err, "%s: %s started", tc.name, cmd)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w, "%s: %s", tc.name, cmd)
			}
		}
	}
}

// TestServeAndWorkerOnOneMachine: `agentry serve` and `agentry worker`, two processes started
// together in one directory in development with the default settings (no master key: both use
// the development key one of them makes; health addresses that do not collide), complete a
// chat turn with the demo model; each stops cleanly on SIGTERM.
func TestServeAndWorkerOnOneMachine(t *testing.T) {
	t.Parallel()
	apptest.Serial(t)
	bin := apptest.Binary(t)
	dir := t.TempDir()
	apiAddr := freeAddr(t) // 8080 may be taken on a shared machine
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DATABASE_URL=" + dbtest.PoolURL(dbtest.URL(t)), "AGENTRY_HTTP_ADDR=" + apiAddr}
	if u := os.Getenv("REDIS_URL"); u != "" {
		env = append(env, "REDIS_URL="+u)
	}
	// The default health addresses when they are free here; others when something holds them.
	defaults := map[string]string{"serve": config.DefaultAPIHealthAddr, "worker": config.DefaultWorkerHealthAddr}
	health := map[string]string{}
	for cmd, addr := range defaults {
		health[cmd] = addr
		if ln, err := net.Listen("tcp", addr); err == nil {
			_ = ln.Close()
			continue
		}
		health[cmd] = freeAddr(t)
		t.Logf("%s is taken here: %s's health listens on %s", addr, cmd, health[cmd])
	}

	type proc struct {
		cmd    *exec.Cmd
		out    *syncBuffer
		exited chan error
	}
	procs := map[string]*proc{}
	for _, name := range []string{"serve", "worker"} {
		cmd := exec.Command(bin, name)
		cmd.Dir = dir
		cmd.Env = env
		if health[name] != defaults[name] {
			cmd.Env = append(cmd.Env, "AGENTRY_HEALTH_ADDR="+health[name])
		}
		p := &proc{cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1)}
		cmd.Stdout, cmd.Stderr = p.out, p.out
		require.NoError(t, cmd.Start())
		go func() { p.exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			err := <-p.exited
			if t.Failed() {
				t.Logf("%s (%v) output:\n%s", name, err, p.out.String())
			}
		})
		procs[name] = p
	}
	for name, addr := range health {
		require.Eventually(t, func() bool {
			status, _ := tryGet("http://" + addr + "/readyz")
			return status == http.StatusOK
		}, 60*time.Second, 50*time.Millisecond, "%s never became ready: %s", name, procs[name].out)
	}
	key, err := os.ReadFile(filepath.Join(dir, ".data", "dev-master-key"))
	require.NoError(t, err, "the development master key")
	require.NotEmpty(t, key)

	// A turn sent to serve is worked by the worker (serve works no jobs).
	api := &process{addr: apiAddr}
	token := api.signUp(t, "two@example.com")
	var conv struct{ CreateConversation struct{ ID, Model string } }
	api.graphql(t, token, `mutation { createConversation(input: {title: "two processes"}) { id model } }`, nil, &conv)
	require.Equal(t, "demo:demo", conv.CreateConversation.Model)
	var sent struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	api.graphql(t, token, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, content: "hello"}) { run { id } } }`,
		map[string]any{"c": conv.CreateConversation.ID}, &sent)
	var r struct{ Run struct{ Status string } }
	require.Eventually(t, func() bool {
		api.graphql(t, token, `query($id: ID!) { run(id: $id) { status } }`, map[string]any{"id": sent.SendMessage.Run.ID}, &r)
		return r.Run.Status == "COMPLETED"
	}, 60*time.Second, 50*time.Millisecond)
	var msgs struct {
		Conversation struct {
			Messages struct {
				Edges []struct {
					Node struct{ Role, Content string }
				}
			}
		}
	}
	api.graphql(t, token, `query($c: ID!) { conversation(id: $c) { messages { edges { node { role content } } } } }`,
		map[string]any{"c": conv.CreateConversation.ID}, &msgs)
	require.Len(t, msgs.Conversation.Messages.Edges, 2)
	require.Contains(t, msgs.Conversation.Messages.Edges[1].Node.Content, "[demo model]")

	// Each serves its metrics on its own health address; the API's listener does not.
	for name, addr := range health {
		status, body := get(t, "http://"+addr+"/metrics")
		require.Equal(t, http.StatusOK, status, name)
		require.Contains(t, body, "go_goroutines", name)
	}
	_, public := get(t, "http://"+apiAddr+"/metrics")
	require.NotContains(t, public, "go_goroutines")

	for name, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-p.exited:
			p.exited <- err
			require.NoError(t, err, "%s exit; output:\n%s", name, p.out)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit within 30s of SIGTERM; output:\n%s", name, p.out)
		}
		require.Equal(t, 1, strings.Count(p.out.String(), "DEVELOPMENT MASTER KEY"), "%s: %s", name, p.out)
	}
}

// tryGet GETs url, answering 0 when nothing answers.
func tryGet(url string) (int, string) {
	client := &http.Client{Timeout: time.Second}
	res, err := client.Get(url)
	if err != nil {
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// riverDownOne takes the database's River schema one migration back, through River's migrator.
func riverDownOne(t *testing.T, databaseURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, databaseURL)
	require.NoError(t, err)
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{MaxSteps: 1})
	require.NoError(t, err)
	require.Len(t, res.Versions, 1)
}
