// Package providers builds agentry's llm.Registry from its configuration: it wires the real
// providers (anthropic, openai) and the demo, which package llm cannot import.
//
//   - anthropic is registered when an Anthropic API key (or base URL, for a proxy) is set;
//   - openai when an OpenAI API key or base URL is set (a base URL alone is a local
//     OpenAI-compatible server such as Ollama, which needs no key);
//   - demo only in development (README: "demo model only in development"), so production never
//     answers with a fake model; in development with no key it is the default model, so
//     `make run` works with no key.
package providers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/anthropic"
	"github.com/agentry/agentry/internal/llm/demo"
	"github.com/agentry/agentry/internal/llm/openai"
)

// Config is what the registry needs of agentry's configuration (internal/config fields of the
// same names).
type Config struct {
	AnthropicAPIKey  string // ANTHROPIC_API_KEY
	AnthropicBaseURL string // ANTHROPIC_BASE_URL
	OpenAIAPIKey     string // OPENAI_API_KEY
	OpenAIBaseURL    string // OPENAI_BASE_URL
	DefaultModel     string // AGENTRY_DEFAULT_MODEL, "provider:model"
	SummaryModel     string // AGENTRY_SUMMARY_MODEL, "provider:model"
	Development      bool   // AGENTRY_ENV=development: the demo provider is registered
	// HTTPClient is used by the HTTP providers (default: one shared client without a timeout;
	// calls are bounded by their context).
	HTTPClient *http.Client
	// DemoWordDelay paces the demo's stream (0: none).
	DemoWordDelay time.Duration
}

// Fallback models when AGENTRY_DEFAULT_MODEL is not set.
const (
	AnthropicDefault = "anthropic:claude-sonnet-4-5"
	OpenAIDefault    = "openai:gpt-4o-mini"
	DemoDefault      = "demo:demo"
)

// New returns the registry of the providers cfg configures.
func New(cfg Config) *llm.Registry {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	r := llm.NewRegistry()
	if cfg.AnthropicAPIKey != "" || cfg.AnthropicBaseURL != "" {
		r.Register(anthropic.New(anthropic.Options{APIKey: cfg.AnthropicAPIKey, BaseURL: cfg.AnthropicBaseURL, HTTPClient: hc}))
	}
	if cfg.OpenAIAPIKey != "" || cfg.OpenAIBaseURL != "" {
		r.Register(openai.New(openai.Options{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL, HTTPClient: hc}))
	}
	if cfg.Development {
		r.Register(&demo.Provider{WordDelay: cfg.DemoWordDelay})
	}
	return r
}

// DefaultModel is the model of conversations that name none: AGENTRY_DEFAULT_MODEL when set,
// else Anthropic's when an Anthropic key (or base URL) is set, else OpenAI's when an OpenAI key or base URL is
// set, else the demo. (With an OpenAI base URL, i.e. a local server, set AGENTRY_DEFAULT_MODEL
// to one of its models: gpt-4o-mini is only a guess.) Outside development the demo is not
// registered, so resolving "demo:demo" fails with an error naming the configured providers.
func DefaultModel(cfg Config) string {
	switch {
	case cfg.DefaultModel != "":
		return cfg.DefaultModel
	case cfg.AnthropicAPIKey != "" || cfg.AnthropicBaseURL != "":
		return AnthropicDefault
	case cfg.OpenAIAPIKey != "" || cfg.OpenAIBaseURL != "":
		return OpenAIDefault
	}
	return DemoDefault
}

// Check refuses a configuration whose AGENTRY_DEFAULT_MODEL or AGENTRY_SUMMARY_MODEL names a
// model that r (the registry New built from cfg) cannot resolve: a provider without its key, a
// demo model outside development, a demo model that does not exist. The error names the
// variable and what to set; a process stops at start on it rather than fail every run.
func Check(cfg Config, r *llm.Registry) error {
	var errs []error
	for _, v := range []struct{ name, ref string }{{"AGENTRY_DEFAULT_MODEL", cfg.DefaultModel}, {"AGENTRY_SUMMARY_MODEL", cfg.SummaryModel}} {
		if v.ref == "" {
			continue
		}
		_, _, err := r.Resolve(v.ref)
		if err == nil {
			continue
		}
		provider, _, _ := strings.Cut(v.ref, ":")
		hint := ""
		if _, ok := r.Provider(provider); !ok {
			switch provider {
			case anthropic.Name:
				hint = ": set ANTHROPIC_API_KEY"
			case openai.Name:
				hint = ": set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)"
			case demo.Name:
				hint = ": the demo model runs only with AGENTRY_ENV=development"
			}
		}
		errs = append(errs, fmt.Errorf("%s=%q: %s%s", v.name, v.ref, llm.Classify(err).Message, hint))
	}
	return errors.Join(errs...)
}
