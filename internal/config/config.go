// Package config reads agentry's configuration from the environment. Every variable has a
// default suited to a laptop; Validate rejects combinations that are unsafe in production.
package config

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Environment names the deployment kind.
type Environment string

// The environments agentry knows.
const (
	Development Environment = "development"
	Production  Environment = "production"
)

// Config is the whole process configuration. The zero value is not usable; call Load.
type Config struct {
	DatabaseURL string // DATABASE_URL
	DBRole      string // AGENTRY_DB_ROLE: role the application pool switches to (SET ROLE); "" keeps the login role
	RedisURL    string // REDIS_URL
	RedisPrefix string // AGENTRY_REDIS_PREFIX: namespaces Redis channels and keys (tests, a shared Redis)
	HTTPAddr    string // AGENTRY_HTTP_ADDR
	// HealthAddr is AGENTRY_HEALTH_ADDR: where /livez, /readyz and /metrics listen; "" until set
	// (HealthAddrFor gives each command's default).
	HealthAddr           string
	Env                  Environment   // AGENTRY_ENV
	MasterKey            []byte        // AGENTRY_MASTER_KEY (32 bytes, base64 or hex); nil until set
	AllowedOrigins       []string      // AGENTRY_ALLOWED_ORIGINS, comma separated
	DefaultModel         string        // AGENTRY_DEFAULT_MODEL
	SummaryModel         string        // AGENTRY_SUMMARY_MODEL
	RetryBaseDelay       time.Duration // AGENTRY_RETRY_BASE_DELAY
	AnthropicAPIKey      string        // ANTHROPIC_API_KEY
	AnthropicBaseURL     string        // ANTHROPIC_BASE_URL
	OpenAIAPIKey         string        // OPENAI_API_KEY
	OpenAIBaseURL        string        // OPENAI_BASE_URL
	JWTIssuer            string        // AGENTRY_JWT_ISSUER
	JWTAudience          string        // AGENTRY_JWT_AUDIENCE
	ShutdownTimeout      time.Duration // AGENTRY_SHUTDOWN_TIMEOUT: grace for in-flight requests and River's soft stop
	MaxBodyBytes         int64         // AGENTRY_MAX_BODY_BYTES: cap on a GraphQL request body
	PasswordHashLimit    int           // AGENTRY_PASSWORD_HASH_CONCURRENCY: concurrent argon2id hashes per process
	WorkerConcurrency    int           // AGENTRY_WORKER_CONCURRENCY: jobs worked at once per worker process
	LocalTurns           int           // AGENTRY_LOCAL_TURNS: chat turns a process serving the API and working jobs works itself at once (0: none)
	SubagentsPlatformMax int           // AGENTRY_SUBAGENTS_PLATFORM_MAX: sub-agents running at once across all tenants
	AccessTokenTTL       time.Duration // AGENTRY_ACCESS_TOKEN_TTL: lifetime of access tokens (default 15m)
	WSInitTimeout        time.Duration // AGENTRY_WS_INIT_TIMEOUT: a WebSocket must send connection_init within this
	ApprovalTTL          time.Duration // AGENTRY_APPROVAL_TTL: how long an approval waits for a person before it expires (default 24h)
	// WorkspaceRetention is how long workspace history (snapshots, file versions, the operation
	// journal) is kept before the retention job prunes it (AGENTRY_WORKSPACE_RETENTION, default
	// 720h, at least 1h).
	WorkspaceRetention time.Duration
	// RateLimitSpend overrides the plans' limits on spending mutations per tenant and per API key
	// (AGENTRY_RATE_LIMIT_SPEND, e.g. "10/s burst 20" or "free=10/s burst 20; pro=100/s burst 200"
	// or "off"); nil keeps the plans' own (the plans table).
	RateLimitSpend map[string]RateLimit
	// RateLimitAuth overrides the per-IP limit of logIn and signUp (AGENTRY_RATE_LIMIT_AUTH); nil
	// keeps the default.
	RateLimitAuth *RateLimit
	// RateLimitCreate overrides the per-user limit of mutations that create something
	// (AGENTRY_RATE_LIMIT_CREATE); nil keeps the default.
	RateLimitCreate *RateLimit
	// WSMaxSubscriptions caps the subscriptions one WebSocket runs at once
	// (AGENTRY_WS_MAX_SUBSCRIPTIONS, default 100).
	WSMaxSubscriptions int
	// WSMaxSocketsPerUser caps the WebSockets one user holds open on one API process
	// (AGENTRY_WS_MAX_SOCKETS_PER_USER, default 20).
	WSMaxSocketsPerUser int
	// RateLimitAccount overrides the per-account limit of logIn and requestPasswordReset (by the
	// email they name; AGENTRY_RATE_LIMIT_ACCOUNT); nil keeps the default.
	RateLimitAccount *RateLimit
	// SMTPURL is AGENTRY_SMTP_URL, the server that sends emails
	// (smtp://user:pass@host:587?from=agentry@example.com, or smtps://); "" logs them in
	// development and is refused in production (Validate).
	SMTPURL string
	// PublicURL is AGENTRY_PUBLIC_URL, the web app's address as people reach it: the links in
	// emails start with it (default http://<AGENTRY_HTTP_ADDR>).
	PublicURL string
	// WebhookRetryBase is the delay before a failed webhook delivery's first retry, doubling
	// after each retry up to an hour (AGENTRY_WEBHOOK_RETRY_BASE, default 10s).
	WebhookRetryBase time.Duration
	// CostRunawayFactor raises a budget.runaway alert when a tenant's spend over the last 10
	// minutes exceeds this many times its trailing hourly average's 10-minute share
	// (AGENTRY_COST_RUNAWAY_FACTOR, default 5; 0 turns the alert off).
	CostRunawayFactor int
}

// Lookup reads one variable; it matches os.Getenv.
type Lookup func(string) string

// Load reads the configuration. An invalid value is an error naming the variable.
func Load(getenv Lookup) (*Config, error) {
	c := &Config{
		DatabaseURL:      or(getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/agentry?sslmode=disable"),
		DBRole:           or(getenv("AGENTRY_DB_ROLE"), "agentry_app"),
		RedisURL:         or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"),
		RedisPrefix:      getenv("AGENTRY_REDIS_PREFIX"),
		HTTPAddr:         or(getenv("AGENTRY_HTTP_ADDR"), "127.0.0.1:8080"),
		Env:              Environment(or(getenv("AGENTRY_ENV"), string(Development))),
		DefaultModel:     getenv("AGENTRY_DEFAULT_MODEL"),
		SummaryModel:     getenv("AGENTRY_SUMMARY_MODEL"),
		AnthropicAPIKey:  getenv("ANTHROPIC_API_KEY"),
		AnthropicBaseURL: getenv("ANTHROPIC_BASE_URL"),
		OpenAIAPIKey:     getenv("OPENAI_API_KEY"),
		OpenAIBaseURL:    getenv("OPENAI_BASE_URL"),
		JWTIssuer:        or(getenv("AGENTRY_JWT_ISSUER"), "agentry"),
		JWTAudience:      or(getenv("AGENTRY_JWT_AUDIENCE"), "agentry-api"),
		SMTPURL:          getenv("AGENTRY_SMTP_URL"),
	}
	c.PublicURL = or(getenv("AGENTRY_PUBLIC_URL"), "http://"+c.HTTPAddr)
	if c.DBRole == "-" {
		c.DBRole = ""
	}
	var errs []string
	bad := func(name, value, why string) {
		errs = append(errs, fmt.Sprintf("%s=%q: %s", name, value, why))
	}
	if c.Env != Development && c.Env != Production {
		bad("AGENTRY_ENV", string(c.Env), "must be development or production")
	}
	for _, v := range []struct{ name, value string }{{"DATABASE_URL", c.DatabaseURL}, {"REDIS_URL", c.RedisURL}} {
		if u, err := url.Parse(v.value); err != nil || u.Scheme == "" || u.Host == "" {
			bad(v.name, v.value, "must be a URL such as "+map[string]string{"DATABASE_URL": "postgres://user@host:5432/db", "REDIS_URL": "redis://host:6379/0"}[v.name])
		}
	}
	for _, v := range []struct{ name, value string }{{"ANTHROPIC_BASE_URL", c.AnthropicBaseURL}, {"OPENAI_BASE_URL", c.OpenAIBaseURL}} {
		if v.value == "" {
			continue
		}
		if u, err := url.Parse(v.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(v.name, v.value, "must be an http(s) URL")
		}
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("AGENTRY_PUBLIC_URL", c.PublicURL, "must be the web app's http(s) address, e.g. https://agentry.example.com")
	}
	if c.SMTPURL != "" {
		if u, err := url.Parse(c.SMTPURL); err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
			// The value holds a password: the message does not repeat it.
			errs = append(errs, "AGENTRY_SMTP_URL: must be smtp://[user:password@]host[:port][?from=address] (or smtps://)")
		}
	}
	if !strings.Contains(c.HTTPAddr, ":") {
		bad("AGENTRY_HTTP_ADDR", c.HTTPAddr, "must be host:port, e.g. 127.0.0.1:8080")
	}
	if c.HealthAddr = getenv("AGENTRY_HEALTH_ADDR"); c.HealthAddr != "" && !strings.Contains(c.HealthAddr, ":") {
		bad("AGENTRY_HEALTH_ADDR", c.HealthAddr, "must be host:port, e.g. 127.0.0.1:9090")
	}
	for _, v := range []struct{ name, value string }{{"AGENTRY_DEFAULT_MODEL", c.DefaultModel}, {"AGENTRY_SUMMARY_MODEL", c.SummaryModel}} {
		if v.value != "" && !validModelRef(v.value) {
			bad(v.name, v.value, `must be "provider:model", e.g. anthropic:claude-sonnet-4-5`)
		}
	}
	if raw := getenv("AGENTRY_MASTER_KEY"); raw != "" {
		key, err := ParseMasterKey(raw)
		if err != nil {
			bad("AGENTRY_MASTER_KEY", "(hidden)", err.Error())
		}
		c.MasterKey = key
	}
	if raw := getenv("AGENTRY_ALLOWED_ORIGINS"); raw != "" {
		for _, o := range strings.Split(raw, ",") {
			o = strings.TrimSpace(o)
			if o == "" {
				continue
			}
			if o != "*" {
				if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" {
					bad("AGENTRY_ALLOWED_ORIGINS", o, "each origin must look like https://app.example.com")
					continue
				}
			}
			c.AllowedOrigins = append(c.AllowedOrigins, o)
		}
	}
	dur := func(name, def string, min time.Duration) time.Duration {
		raw := or(getenv(name), def)
		d, err := time.ParseDuration(raw)
		if err != nil || d < min {
			bad(name, raw, fmt.Sprintf("must be a duration of at least %s, e.g. %s", min, def))
		}
		return d
	}
	integer := func(name string, def, min, max int64) int64 {
		raw := getenv(name)
		if raw == "" {
			return def
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < min || n > max {
			bad(name, raw, fmt.Sprintf("must be an integer from %d to %d", min, max))
		}
		return n
	}
	c.RetryBaseDelay = dur("AGENTRY_RETRY_BASE_DELAY", "30s", time.Millisecond)
	c.ShutdownTimeout = dur("AGENTRY_SHUTDOWN_TIMEOUT", "25s", 0)
	c.AccessTokenTTL = dur("AGENTRY_ACCESS_TOKEN_TTL", "15m", time.Second)
	c.WSInitTimeout = dur("AGENTRY_WS_INIT_TIMEOUT", "10s", 100*time.Millisecond)
	c.ApprovalTTL = dur("AGENTRY_APPROVAL_TTL", "24h", time.Second)
	c.WorkspaceRetention = dur("AGENTRY_WORKSPACE_RETENTION", "720h", time.Hour)
	c.MaxBodyBytes = integer("AGENTRY_MAX_BODY_BYTES", 1<<20, 1<<10, 64<<20)
	c.PasswordHashLimit = int(integer("AGENTRY_PASSWORD_HASH_CONCURRENCY", 2, 1, 256))
	c.WorkerConcurrency = int(integer("AGENTRY_WORKER_CONCURRENCY", 50, 1, 10000))
	c.LocalTurns = int(integer("AGENTRY_LOCAL_TURNS", int64(c.WorkerConcurrency), 0, 10000))
	c.SubagentsPlatformMax = int(integer("AGENTRY_SUBAGENTS_PLATFORM_MAX", 200, 1, 100000))
	c.WebhookRetryBase = dur("AGENTRY_WEBHOOK_RETRY_BASE", "10s", time.Millisecond)
	c.CostRunawayFactor = int(integer("AGENTRY_COST_RUNAWAY_FACTOR", 5, 0, 1000))
	if raw := getenv("AGENTRY_RATE_LIMIT_SPEND"); raw != "" {
		var err error
		if c.RateLimitSpend, err = ParseRateLimits(raw); err != nil {
			bad("AGENTRY_RATE_LIMIT_SPEND", raw, err.Error())
		}
	}
	c.WSMaxSubscriptions = int(integer("AGENTRY_WS_MAX_SUBSCRIPTIONS", 100, 1, 100_000))
	c.WSMaxSocketsPerUser = int(integer("AGENTRY_WS_MAX_SOCKETS_PER_USER", 20, 1, 100_000))
	for _, v := range []struct {
		name string
		to   **RateLimit
	}{{"AGENTRY_RATE_LIMIT_AUTH", &c.RateLimitAuth}, {"AGENTRY_RATE_LIMIT_CREATE", &c.RateLimitCreate}, {"AGENTRY_RATE_LIMIT_ACCOUNT", &c.RateLimitAccount}} {
		if raw := getenv(v.name); raw != "" {
			l, err := ParseRateLimit(raw)
			if err != nil {
				bad(v.name, raw, err.Error())
			}
			*v.to = &l
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration:\n  %s", strings.Join(errs, "\n  "))
	}
	return c, nil
}

// ErrNoMailServer is what Validate answers (wrapped) for a production configuration without
// AGENTRY_SMTP_URL. A program that gives the process its own mail sender (app.WithMail) may
// start without one.
var ErrNoMailServer = errors.New("AGENTRY_SMTP_URL is required")

// Validate checks what a serving process needs beyond parsing. Outside development a master key
// is required, and then a mail server: without one nobody could verify an email address, accept
// an invitation or reset a password.
func (c *Config) Validate() error {
	if c.Env == Development {
		return nil
	}
	if len(c.MasterKey) == 0 {
		return fmt.Errorf("AGENTRY_MASTER_KEY is required when AGENTRY_ENV=%s: set it to 32 random bytes, base64-encoded (openssl rand -base64 32)", c.Env)
	}
	if c.SMTPURL == "" {
		return fmt.Errorf("%w when AGENTRY_ENV=%s: email address verification, invitations and password resets are sent by email; set it to the SMTP server's URL, e.g. smtp://user:password@smtp.example.com:587?from=agentry@example.com (smtps:// for TLS from the start)", ErrNoMailServer, c.Env)
	}
	return nil
}

// The health address of each command when AGENTRY_HEALTH_ADDR is not set: a worker's and an API
// process's differ, so that one of each runs on a machine with the defaults.
const (
	DefaultWorkerHealthAddr = "127.0.0.1:9090" // agentry worker
	DefaultAPIHealthAddr    = "127.0.0.1:9091" // agentry serve and agentry dev
)

// HealthAddrFor is the address of the health listener (/livez, /readyz, /metrics) of a process
// that serves the API (api) or only works jobs: AGENTRY_HEALTH_ADDR, else the command's default.
func (c *Config) HealthAddrFor(api bool) string {
	switch {
	case c.HealthAddr != "":
		return c.HealthAddr
	case api:
		return DefaultAPIHealthAddr
	}
	return DefaultWorkerHealthAddr
}

// IsDevelopment reports whether development-only features (introspection, dev keys) are on.
func (c *Config) IsDevelopment() bool { return c.Env == Development }

// ParseMasterKey decodes a 32-byte key given as standard or URL base64, or as hex.
func ParseMasterKey(raw string) ([]byte, error) {
	raw = strings.TrimSpace(raw)
	for _, dec := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString,
	} {
		if k, err := dec(raw); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, fmt.Errorf("must be 32 bytes encoded as base64 or hex (openssl rand -base64 32)")
}

func validModelRef(s string) bool {
	p, m, ok := strings.Cut(s, ":")
	return ok && p != "" && m != ""
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
