package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// chromiumPath is Debian's Chromium, which playwright-core drives (it never downloads a browser).
const chromiumPath = "/usr/bin/chromium"

// TestBrowser runs the web app's acceptance scenarios (e2e/run.mjs) in headless Chromium against
// a real `agentry dev` on a fresh database, with a scripted model behind the Anthropic wire
// format. It needs the built app (make web), web/node_modules and Chromium; outside CI it skips
// when one is missing, in CI it fails.
func TestBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	for _, need := range []struct{ path, how string }{
		{chromiumPath, "apt-get install chromium"},
		{"node_modules/playwright-core", "make web"},
		{"dist/app/index.html", "make web"},
	} {
		if _, err := os.Stat(need.path); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (%s)", need.path, need.how)
			}
			t.Skipf("%s is missing: run %s", need.path, need.how)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}

	model := llmtest.NewAnthropicServer(t)
	model.SetResponder(script)

	base, logPath, devEnv := startDev(t, map[string]string{
		"ANTHROPIC_API_KEY":     "test-key",
		"ANTHROPIC_BASE_URL":    model.URL,
		"AGENTRY_DEFAULT_MODEL": "anthropic:claude-sonnet-4-5",
		// Short-lived access tokens: the app must renew them (and reconnect its WebSocket) all along.
		"AGENTRY_ACCESS_TOKEN_TTL": "20s",
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shots, err := filepath.Abs(filepath.Join("e2e", "screenshots"))
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "node", filepath.Join("e2e", "run.mjs"))
	cmd.Env = append(os.Environ(),
		"AGENTRY_URL="+base,
		"CHROMIUM="+chromiumPath,
		"SCREENSHOTS="+shots,
		// The development mail sender logs each email: the scenarios open the links in it.
		"AGENTRY_LOG="+logPath,
		// `agentry admin grant EMAIL` with the server's environment makes a platform admin.
		"AGENTRY_BIN="+apptest.Binary(t),
		"AGENTRY_DEV_ENV="+string(devEnv),
	)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	t.Logf("browser scenarios:\n%s", out.String())
	require.NoError(t, err, "a browser scenario failed (output above); screenshots in %s", shots)
}

// startDev runs `agentry dev` on a fresh database and a free port until the test ends, and
// returns its base URL once it is ready, the path of its log and its environment (a JSON
// object, for the binary's other commands on the same database).
func startDev(t *testing.T, extra map[string]string) (string, string, []byte) {
	t.Helper()
	addr, healthAddr := freeAddr(t), freeAddr(t)

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	// Pools of a test's size (dbtest.PoolSize, where the default is 8): the suite's other
	// packages run beside this one on a Postgres that may allow 50 connections.
	env := map[string]string{
		"PATH":                      os.Getenv("PATH"),
		"HOME":                      os.Getenv("HOME"),
		"DATABASE_URL":              dbtest.PoolURL(dbtest.URL(t)),
		"REDIS_URL":                 redisURL,
		"AGENTRY_REDIS_PREFIX":      fmt.Sprintf("browser%d:", time.Now().UnixNano()),
		"AGENTRY_MASTER_KEY":        base64.StdEncoding.EncodeToString(key),
		"AGENTRY_ENV":               "development",
		"AGENTRY_HTTP_ADDR":         addr,
		"AGENTRY_HEALTH_ADDR":       healthAddr,
		"AGENTRY_RATE_LIMIT_SPEND":  "off",
		"AGENTRY_RATE_LIMIT_AUTH":   "off",
		"AGENTRY_RATE_LIMIT_CREATE": "off",
		"AGENTRY_RETRY_BASE_DELAY":  "100ms",
	}
	for k, v := range extra {
		env[k] = v
	}
	envJSON, err := json.Marshal(env)
	require.NoError(t, err)
	cmd := exec.Command(apptest.Binary(t), "dev")
	cmd.Dir = t.TempDir()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logPath := filepath.Join(t.TempDir(), "agentry.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() || os.Getenv("AGENTRY_TEST_LOG") == "1" {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("agentry dev log:\n%s", tail(string(b), 200))
			}
		}
	})

	base := "http://" + addr
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("agentry dev exited:\n%s", b)
		default:
		}
		res, err := http.Get(base + "/readyz")
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base, logPath, envJSON
			}
		}
		require.True(t, time.Now().Before(deadline), "agentry dev was not ready within 2 minutes")
		time.Sleep(100 * time.Millisecond) // polling for readiness, not settling
	}
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// slowWords is the answer of the "slow" script: numbered words, so a lost or repeated piece shows.
func slowWords() []string {
	var ws []string
	for i := 1; i <= 60; i++ {
		sep := " "
		if i == 1 {
			sep = ""
		}
		ws = append(ws, fmt.Sprintf("%sword%d", sep, i))
	}
	return append(ws, " THE END.")
}

// script answers by the person's last message (the e2e scenarios' words):
//
//	"stream"        a markdown answer with a code block, streamed word by word
//	"slow"          slowWords, a delta every 150 ms (cancel and reload scenarios)
//	"write"         write_file notes/plan.md, then a short confirmation
//	"update"        write_file notes/plan.md with new content, then a confirmation
//	"break"         write_file src/broken.txt, then a 401 from the provider: the run fails
//	anything else   a one-line answer
func script(req llmtest.Request) llmtest.Reply {
	msgs := req.Messages()
	prompt, afterTool := "", false
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i]["role"] != "user" {
			continue
		}
		text, results := userContent(msgs[i]["content"])
		if i == len(msgs)-1 && results {
			afterTool = true
		}
		if text != "" {
			prompt = strings.ToLower(text)
			break
		}
	}
	usage := llmtest.Usage(1200, 80, 0)
	// A team run's phases, told apart by their system prompts (internal/team).
	switch raw := string(req.Raw); {
	case strings.Contains(raw, "You are the Architect of a team"):
		return llmtest.Stream(llmtest.Text("1. Write notes/team.md with the goal.\n2. Keep it short."), usage)
	case strings.Contains(raw, "You are the Executor of a team"):
		return llmtest.Stream(llmtest.Text("Implemented the plan."), usage)
	case strings.Contains(raw, "You are the Reviewer of a team"):
		if afterTool {
			return llmtest.Stream(llmtest.Text("Review given."), usage)
		}
		return llmtest.Stream(llmtest.ToolCall("toolu_r1", "submit_review", `{"verdict":"APPROVE","summary":"The plan is followed; looks good.","issues":[]}`), usage)
	}
	switch {
	case strings.Contains(prompt, "stream"):
		steps := []llmtest.Step{usage}
		answer := "Here is a **streamed** answer, one word at a time.\n\n```go\nfunc hello() string { return \"hi\" }\n```\n\nThat is all for now."
		for _, w := range llmtest.SplitWords(answer) {
			steps = append(steps, llmtest.TextDeltas(w), llmtest.Delay(60*time.Millisecond))
		}
		return llmtest.Stream(steps...)
	case strings.Contains(prompt, "slow"):
		steps := []llmtest.Step{usage}
		for _, w := range slowWords() {
			steps = append(steps, llmtest.TextDeltas(w), llmtest.Delay(150*time.Millisecond))
		}
		return llmtest.Stream(steps...)
	case strings.Contains(prompt, "write"):
		if afterTool {
			return llmtest.Stream(llmtest.Text("Done: I wrote notes/plan.md."), usage)
		}
		return llmtest.Stream(llmtest.Text("I will write the plan."), writeFile("toolu_w1", "notes/plan.md", "# Plan\n\n1. Sign up\n2. Chat\n"), usage)
	case strings.Contains(prompt, "update"):
		if afterTool {
			return llmtest.Stream(llmtest.Text("Done: I updated notes/plan.md."), usage)
		}
		return llmtest.Stream(writeFile("toolu_u1", "notes/plan.md", "# Plan\n\n1. Sign up\n2. Chat\n3. Ship it\n"), usage)
	case strings.Contains(prompt, "break"):
		if afterTool {
			return llmtest.Error(http.StatusUnauthorized, "invalid x-api-key")
		}
		return llmtest.Stream(writeFile("toolu_b1", "src/broken.txt", "half-done work\n"), usage)
	default:
		return llmtest.Stream(llmtest.Text("Hello from the test model."), usage)
	}
}

func writeFile(id, path, content string) llmtest.Step {
	args, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return llmtest.ToolCall(id, "write_file", string(args))
}

// userContent returns the text of a user message and whether it carries tool results.
func userContent(c any) (text string, toolResults bool) {
	switch v := c.(type) {
	case string:
		return v, false
	case []any:
		var b strings.Builder
		for _, blk := range v {
			m, _ := blk.(map[string]any)
			switch m["type"] {
			case "text":
				s, _ := m["text"].(string)
				b.WriteString(s)
			case "tool_result":
				toolResults = true
			}
		}
		return b.String(), toolResults
	}
	return "", false
}
