package providers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/llm/providers"
)

func TestNewAndDefaultModel(t *testing.T) {
	cases := []struct {
		name  string
		cfg   providers.Config
		names string
		model string
	}{
		{"no key, development", providers.Config{Development: true}, "demo", "demo:demo"},
		{"no key, production", providers.Config{}, "", "demo:demo"},
		{"anthropic", providers.Config{AnthropicAPIKey: "k", Development: true}, "anthropic,demo", "anthropic:claude-sonnet-4-5"},
		{"openai key", providers.Config{OpenAIAPIKey: "k"}, "openai", "openai:gpt-4o-mini"},
		{"ollama", providers.Config{OpenAIBaseURL: "http://127.0.0.1:11434/v1"}, "openai", "openai:gpt-4o-mini"},
		{"both", providers.Config{AnthropicAPIKey: "a", OpenAIAPIKey: "o"}, "anthropic,openai", "anthropic:claude-sonnet-4-5"},
		{"explicit", providers.Config{OpenAIBaseURL: "http://x/v1", DefaultModel: "openai:llama3.2"}, "openai", "openai:llama3.2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := providers.New(c.cfg)
			if got := strings.Join(r.Names(), ","); got != c.names {
				t.Fatalf("providers = %q, want %q", got, c.names)
			}
			if got := providers.DefaultModel(c.cfg); got != c.model {
				t.Fatalf("default model = %q, want %q", got, c.model)
			}
		})
	}
	// Production without a key: the default does not resolve, and the error says why.
	_, _, err := providers.New(providers.Config{}).Resolve(providers.DefaultModel(providers.Config{}))
	if err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("resolve = %v", err)
	}
}

func TestWiredProvidersWork(t *testing.T) {
	asrv := llmtest.NewAnthropicServer(t)
	osrv := llmtest.NewOpenAIServer(t)
	asrv.SetDefault(llmtest.Stream(llmtest.Text("from anthropic")))
	osrv.SetDefault(llmtest.Stream(llmtest.Text("from openai")))
	r := providers.New(providers.Config{
		AnthropicAPIKey: "a", AnthropicBaseURL: asrv.BaseURL(),
		OpenAIBaseURL: osrv.BaseURL(), Development: true,
	})
	for ref, want := range map[string]string{
		"anthropic:claude-sonnet-4-5": "from anthropic",
		"openai:llama3.2":             "from openai",
		"demo:demo":                   "[demo model] ",
	} {
		p, m, err := r.Resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		s, err := p.Stream(context.Background(), llm.Request{Model: m.ID, Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := llm.Collect(s, nil)
		if err != nil || !strings.HasPrefix(resp.Blocks[0].Text, want) {
			t.Fatalf("%s: %+v, %v", ref, resp, err)
		}
	}
	if asrv.LastRequest(t).Model() != "claude-sonnet-4-5" || osrv.LastRequest(t).Model() != "llama3.2" {
		t.Fatal("model ids not passed through")
	}
}

func TestCheckNamesTheVariableAndTheFix(t *testing.T) {
	cases := []struct {
		name string
		cfg  providers.Config
		want []string // empty: no error
	}{
		{"nothing configured", providers.Config{}, nil},
		{"default with its key", providers.Config{AnthropicAPIKey: "k", DefaultModel: "anthropic:claude-sonnet-4-5"}, nil},
		{"demo in development", providers.Config{Development: true, DefaultModel: "demo:demo", SummaryModel: "demo:demo"}, nil},
		{"default without its key", providers.Config{AnthropicAPIKey: "k", DefaultModel: "openai:gpt-4o"}, []string{"AGENTRY_DEFAULT_MODEL", "OPENAI_API_KEY"}},
		{"summary without its key", providers.Config{OpenAIAPIKey: "k", SummaryModel: "anthropic:claude-haiku-4-5"}, []string{"AGENTRY_SUMMARY_MODEL", "ANTHROPIC_API_KEY"}},
		{"demo in production", providers.Config{DefaultModel: "demo:demo"}, []string{"AGENTRY_DEFAULT_MODEL", "AGENTRY_ENV=development"}},
		{"a demo model that does not exist", providers.Config{Development: true, DefaultModel: "demo:gpt-5"}, []string{"demo:gpt-5", "demo:demo"}},
		{"an unknown provider", providers.Config{Development: true, SummaryModel: "mistral:small"}, []string{"AGENTRY_SUMMARY_MODEL", "not configured"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := providers.Check(c.cfg, providers.New(c.cfg))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "TERMINAL") {
				t.Errorf("%q names the failure class", err)
			}
		})
	}
}
