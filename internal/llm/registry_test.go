package llm_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/llm"
)

type named string

func (n named) Name() string { return string(n) }
func (n named) Stream(context.Context, llm.Request) (llm.Stream, error) {
	return nil, errors.New("not implemented")
}

func TestRegistryResolve(t *testing.T) {
	r := llm.NewRegistry(named("anthropic"))
	r.Register(named("demo"))
	if got := strings.Join(r.Names(), ","); got != "anthropic,demo" {
		t.Fatalf("names = %s", got)
	}
	p, m, err := r.Resolve("anthropic:claude-sonnet-4-5-20250929")
	if err != nil || p.Name() != "anthropic" || !m.Known || m.ContextTokens != 200_000 || m.ID != "claude-sonnet-4-5-20250929" {
		t.Fatalf("resolve = %v %+v %v", p, m, err)
	}

	_, _, err = r.Resolve("openai:gpt-4o")
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.Terminal || !strings.Contains(e.Message, `"openai" is not configured`) || !strings.Contains(e.Message, "anthropic, demo") {
		t.Fatalf("unknown provider: %v", err)
	}
	if _, _, err := r.Resolve("no-colon"); !errors.As(err, &e) || e.Class != llm.Terminal {
		t.Fatalf("malformed ref: %v", err)
	}
	if _, _, err := llm.NewRegistry().Resolve("demo:demo"); err == nil || !strings.Contains(err.Error(), "configured providers: none") {
		t.Fatalf("empty registry: %v", err)
	}
}
