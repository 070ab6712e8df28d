package config_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/config"
)

func env(m map[string]string) config.Lookup {
	return func(k string) string { return m[k] }
}

func TestDefaultsMatchAPI(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/agentry?sslmode=disable", c.DatabaseURL)
	require.Equal(t, "redis://127.0.0.1:6379/0", c.RedisURL)
	require.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	require.Equal(t, config.Development, c.Env)
	require.True(t, c.IsDevelopment())
	require.Equal(t, 30*time.Second, c.RetryBaseDelay)
	require.Nil(t, c.MasterKey)
	require.Empty(t, c.DefaultModel)
	require.Empty(t, c.AllowedOrigins)
	require.Positive(t, c.ShutdownTimeout)
	require.Positive(t, c.MaxBodyBytes)
	require.Equal(t, 30*24*time.Hour, c.WorkspaceRetention)
	// Development without a master key is allowed (dev makes one).
	require.NoError(t, c.Validate())
}

func TestValidValuesAreRead(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(map[string]string{
		"DATABASE_URL":                "postgres://u:p@db.internal:5433/agentry",
		"REDIS_URL":                   "redis://cache:6380/2",
		"AGENTRY_HTTP_ADDR":           ":9090",
		"AGENTRY_ENV":                 "production",
		"AGENTRY_DEFAULT_MODEL":       "anthropic:claude-sonnet-4-5",
		"AGENTRY_ALLOWED_ORIGINS":     "https://app.example.com, http://localhost:5173,",
		"AGENTRY_RETRY_BASE_DELAY":    "2s",
		"AGENTRY_MAX_BODY_BYTES":      "2048",
		"OPENAI_BASE_URL":             "http://127.0.0.1:11434/v1",
		"AGENTRY_WORKSPACE_RETENTION": "168h",
	}))
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@db.internal:5433/agentry", c.DatabaseURL)
	require.Equal(t, "redis://cache:6380/2", c.RedisURL)
	require.Equal(t, ":9090", c.HTTPAddr)
	require.Equal(t, config.Production, c.Env)
	require.False(t, c.IsDevelopment())
	require.Equal(t, "anthropic:claude-sonnet-4-5", c.DefaultModel)
	require.Equal(t, []string{"https://app.example.com", "http://localhost:5173"}, c.AllowedOrigins)
	require.Equal(t, 2*time.Second, c.RetryBaseDelay)
	require.EqualValues(t, 2048, c.MaxBodyBytes)
	require.Equal(t, "http://127.0.0.1:11434/v1", c.OpenAIBaseURL)
	require.Equal(t, 7*24*time.Hour, c.WorkspaceRetention)
}

func TestInvalidValueNamesTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value string }{
		{"AGENTRY_ENV", "staging"},
		{"DATABASE_URL", "not a url"},
		{"REDIS_URL", "::"},
		{"AGENTRY_RETRY_BASE_DELAY", "abc"},
		{"AGENTRY_RETRY_BASE_DELAY", "-5s"},
		{"AGENTRY_MASTER_KEY", "short"},
		{"AGENTRY_DEFAULT_MODEL", "nocolon"},
		{"AGENTRY_SUMMARY_MODEL", "openai:"},
		{"AGENTRY_ALLOWED_ORIGINS", "notanorigin"},
		{"AGENTRY_MAX_BODY_BYTES", "-1"},
		{"AGENTRY_MAX_BODY_BYTES", "lots"},
		{"OPENAI_BASE_URL", "ftp://x"},
		{"ANTHROPIC_BASE_URL", "not a url"},
		{"AGENTRY_HTTP_ADDR", "8080"},
		{"AGENTRY_SHUTDOWN_TIMEOUT", "soon"},
		{"AGENTRY_WORKER_CONCURRENCY", "0"},
		{"AGENTRY_WORKSPACE_RETENTION", "30d"},
		{"AGENTRY_WORKSPACE_RETENTION", "10m"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(env(map[string]string{tc.name: tc.value}))
			require.Error(t, err)
			require.Nil(t, c)
			require.Contains(t, err.Error(), tc.name)
		})
	}
}

func TestSeveralInvalidValuesAreAllReported(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"AGENTRY_ENV":              "staging",
		"DATABASE_URL":             "not a url",
		"REDIS_URL":                "::",
		"AGENTRY_RETRY_BASE_DELAY": "abc",
		"AGENTRY_MASTER_KEY":       "short",
		"AGENTRY_DEFAULT_MODEL":    "nocolon",
		"AGENTRY_ALLOWED_ORIGINS":  "notanorigin",
		"AGENTRY_MAX_BODY_BYTES":   "-1",
		"OPENAI_BASE_URL":          "ftp://x",
	}
	_, err := config.Load(env(bad))
	require.Error(t, err)
	for name := range bad {
		require.Contains(t, err.Error(), name)
	}
}

func TestMasterKeyEncodings(t *testing.T) {
	t.Parallel()
	// 0xfb/0xff bytes make the standard and URL base64 alphabets differ (+/ versus -_).
	key := bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 11)[:32]
	std := base64.StdEncoding.EncodeToString(key)
	url := base64.URLEncoding.EncodeToString(key)
	require.NotEqual(t, std, url)
	for name, raw := range map[string]string{
		"base64":               std,
		"base64 unpadded":      base64.RawStdEncoding.EncodeToString(key),
		"base64url":            url,
		"base64url unpadded":   base64.RawURLEncoding.EncodeToString(key),
		"hex":                  hex.EncodeToString(key),
		"HEX":                  strings.ToUpper(hex.EncodeToString(key)),
		"base64 with newline":  std + "\n",
		"hex with surrounding": "  " + hex.EncodeToString(key) + " ",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(env(map[string]string{"AGENTRY_MASTER_KEY": raw}))
			require.NoError(t, err)
			require.Equal(t, key, c.MasterKey)
			k, err := config.ParseMasterKey(raw)
			require.NoError(t, err)
			require.Equal(t, key, k)
		})
	}
	// 31 and 33 bytes are refused.
	for _, n := range []int{16, 31, 33, 64} {
		_, err := config.ParseMasterKey(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)))
		require.Error(t, err, "%d bytes", n)
		_, err = config.ParseMasterKey(hex.EncodeToString(bytes.Repeat([]byte{7}, n)))
		require.Error(t, err, "%d bytes hex", n)
	}
}

func TestMasterKeyIsNeverPrinted(t *testing.T) {
	t.Parallel()
	// Values that look like secrets but are the wrong length: the error must not echo them.
	for _, raw := range []string{
		"short",
		base64.StdEncoding.EncodeToString([]byte("thirty-one bytes of secret key!")),
		hex.EncodeToString([]byte("a forty-byte secret that is too long....")),
		"s3cr3t-value-that-is-not-base64-at-all!!",
	} {
		_, err := config.Load(env(map[string]string{"AGENTRY_MASTER_KEY": raw, "AGENTRY_ENV": "production"}))
		require.Error(t, err)
		require.Contains(t, err.Error(), "AGENTRY_MASTER_KEY")
		require.NotContains(t, err.Error(), strings.TrimSpace(raw))
	}

	// A valid key is not printed by Validate's or Load's errors either.
	key := bytes.Repeat([]byte{0x42}, 32)
	raw := base64.StdEncoding.EncodeToString(key)
	_, err := config.Load(env(map[string]string{"AGENTRY_MASTER_KEY": raw, "AGENTRY_ENV": "staging"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), raw)
	require.NotContains(t, err.Error(), string(key))
}

func TestValidateRequiresMasterKeyInProduction(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(map[string]string{"AGENTRY_ENV": "production"}))
	require.NoError(t, err, "Load parses; Validate decides")
	err = c.Validate()
	require.Error(t, err)
	require.Contains(t, err.Error(), "AGENTRY_MASTER_KEY")

	c, err = config.Load(env(map[string]string{
		"AGENTRY_ENV":        "production",
		"AGENTRY_MASTER_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)),
		"AGENTRY_SMTP_URL":   "smtp://mail.example.com:587",
	}))
	require.NoError(t, err)
	require.NoError(t, c.Validate())
}

// TestValidateRequiresMailServerInProduction: a production process without AGENTRY_SMTP_URL
// could not send the links that verify addresses, accept invitations and reset passwords, so
// it does not start; the error names the variable and is ErrNoMailServer (which a program
// giving its own sender may pass over). Development logs the links instead.
func TestValidateRequiresMailServerInProduction(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	c, err := config.Load(env(map[string]string{"AGENTRY_ENV": "production", "AGENTRY_MASTER_KEY": key}))
	require.NoError(t, err)
	err = c.Validate()
	require.ErrorIs(t, err, config.ErrNoMailServer)
	require.Contains(t, err.Error(), "AGENTRY_SMTP_URL")

	// Without a master key either, the master key is named first (and the answer is not
	// ErrNoMailServer, so no sender given to the process passes it over).
	c, err = config.Load(env(map[string]string{"AGENTRY_ENV": "production"}))
	require.NoError(t, err)
	require.NotErrorIs(t, c.Validate(), config.ErrNoMailServer)

	c, err = config.Load(env(map[string]string{"AGENTRY_ENV": "development"}))
	require.NoError(t, err)
	require.NoError(t, c.Validate())
}

// TestHealthAddresses: a worker's and an API process's health listeners have different
// defaults, so that one of each starts on a machine with the default settings, and
// AGENTRY_HEALTH_ADDR overrides both.
func TestHealthAddresses(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9090", c.HealthAddrFor(false))
	require.Equal(t, "127.0.0.1:9091", c.HealthAddrFor(true))
	require.NotEqual(t, c.HTTPAddr, c.HealthAddrFor(true))
	c, err = config.Load(env(map[string]string{"AGENTRY_HEALTH_ADDR": "0.0.0.0:9100"}))
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9100", c.HealthAddrFor(false))
	require.Equal(t, "0.0.0.0:9100", c.HealthAddrFor(true))
	_, err = config.Load(env(map[string]string{"AGENTRY_HEALTH_ADDR": "9100"}))
	require.ErrorContains(t, err, "AGENTRY_HEALTH_ADDR")
}
