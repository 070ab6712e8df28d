package apptest

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db/dbtest"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// Binary builds the agentry binary once per test process, in a temporary directory, and returns
// its path. A package whose tests call it removes it when they end (Main, as its TestMain).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		dir, err := os.MkdirTemp("", "agentry-bin")
		if err != nil {
			buildErr = err
			return
		}
		binDir, binPath = dir, filepath.Join(dir, "agentry")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/agentry")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	require.NoError(t, buildErr, "build agentry: %s", binPath)
	return binPath
}

// Main runs a package's tests (m.Run) and then removes the binary they built (Binary), so that
// no run leaves one behind: the TestMain of a package whose tests call Binary is
// `func TestMain(m *testing.M) { apptest.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ProcessEnv is the environment another agentry process needs to share this one's database,
// Redis namespace and keys, plus extra.
func (e *Env) ProcessEnv(extra map[string]string) []string {
	c := e.App.Config
	env := map[string]string{
		"PATH":                 os.Getenv("PATH"),
		"HOME":                 os.Getenv("HOME"),
		"DATABASE_URL":         dbtest.PoolURL(e.OwnerURL),
		"REDIS_URL":            c.RedisURL,
		"AGENTRY_REDIS_PREFIX": c.RedisPrefix,
		"AGENTRY_MASTER_KEY":   base64.StdEncoding.EncodeToString(c.MasterKey),
		"AGENTRY_ENV":          string(c.Env),
		"AGENTRY_HTTP_ADDR":    "127.0.0.1:0",
		"AGENTRY_HEALTH_ADDR":  "127.0.0.1:0",
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
