package graph_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// tpLog is a process's output, safe to read while it is written.
type tpLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *tpLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *tpLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestTwoProcesses: an API process (in the test) and a worker process (`agentry worker`, its own
// OS process) share a database and Redis; a WebSocket subscriber on the API process receives the
// token deltas and the terminal event of a run the other process works; the worker stops
// cleanly on SIGTERM.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	apptest.Serial(t)
	start := time.Now()
	bin := apptest.Binary(t)
	t.Logf("built cmd/agentry in %s", time.Since(start).Round(time.Millisecond))
	llm := llmtest.NewAnthropicServer(t)
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	const reply = "Hello from the worker process, streamed word by word."
	llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		<-release // until the subscriber listens, so every delta is live
		return llmtest.Stream(llmtest.Text(reply))
	})
	llmEnv := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": llm.BaseURL()}

	api := apptest.Start(t, apptest.Options{NoWork: true, Env: llmEnv})
	cfg := api.App.Config
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"DATABASE_URL=" + dbtest.PoolURL(api.OwnerURL),
		"REDIS_URL=" + cfg.RedisURL,
		"AGENTRY_REDIS_PREFIX=" + cfg.RedisPrefix,
		"AGENTRY_MASTER_KEY=" + base64.StdEncoding.EncodeToString(cfg.MasterKey),
		"AGENTRY_HTTP_ADDR=127.0.0.1:0",
		"AGENTRY_HEALTH_ADDR=127.0.0.1:0",
		"AGENTRY_ENV=development",
		"AGENTRY_RETRY_BASE_DELAY=50ms",
		"AGENTRY_SHUTDOWN_TIMEOUT=5s",
	}
	for k, v := range llmEnv {
		env = append(env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	worker := exec.CommandContext(ctx, bin, "worker")
	worker.Env = env
	var logs tpLog
	worker.Stdout, worker.Stderr = &logs, &logs
	worker.WaitDelay = 5 * time.Second
	require.NoError(t, worker.Start())
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	t.Cleanup(func() {
		_ = worker.Process.Kill()
		err := <-exited
		if t.Failed() {
			t.Logf("worker (%v) output:\n%s", err, logs.String())
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "agentry listening") }, 30*time.Second, 20*time.Millisecond,
		"the worker did not start: %s", &logs)

	// The API process has no worker: only the other process can work the run.
	c := &chatEnv{Env: api, llm: llm, model: "anthropic:claude-sonnet-4-5", s: api.SignUp(t, "", "")}
	s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	subWaitListening(t, subRedis(t), api, c.s.TenantID)
	releaseOnce()

	evs := sub.Collect(20*time.Second, nil)
	require.Empty(t, sub.Err, "%s", sub.Err)
	durable := apptest.Durable(t, evs, 0)
	require.Equal(t, "execution.completed", durable[len(durable)-1].Type)
	// The subscription may start with a snapshot of what was streamed before it read the
	// stream (its deltas are then skipped); the deltas after it complete the reply.
	var text strings.Builder
	for _, e := range evs {
		if e.Type == "message.delta" || e.Type == "message.snapshot" {
			var d struct{ Text string }
			require.NoError(t, json.Unmarshal(e.Data, &d))
			if e.Type == "message.snapshot" {
				text.Reset()
			}
			text.WriteString(d.Text)
		}
	}
	require.Equal(t, reply, text.String(), "token deltas published by the worker process")
	all, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	subSameLog(t, all, durable, "events over the wire vs stored")
	// One attempt, one model call: the worker process did the work (this database has no
	// other worker: the API process runs none, and every other test has a database of its own).
	require.Equal(t, 1, subCount(durable, "execution.started"))
	require.Equal(t, 1, llm.Calls())

	// SIGTERM: the worker shuts down gracefully and exits 0.
	require.NoError(t, worker.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		require.NoError(t, err, "worker exit; output:\n%s", &logs)
		require.Equal(t, 0, worker.ProcessState.ExitCode())
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker did not exit within 10s of SIGTERM; output:\n%s", &logs)
	}
}
