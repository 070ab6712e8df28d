package llm_test

import (
	"testing"

	"github.com/agentry/agentry/internal/llm"
)

func TestLookup(t *testing.T) {
	cases := []struct {
		provider, model string
		known           bool
		context         int
		input           int64
	}{
		{"anthropic", "claude-sonnet-4-5", true, 200_000, 3_000_000},
		{"anthropic", "claude-sonnet-4-5-20250929", true, 200_000, 3_000_000},
		{"anthropic", "claude-opus-4-1-20250805", true, 200_000, 15_000_000},
		{"anthropic", "claude-haiku-4-5-20251001", true, 200_000, 1_000_000},
		{"openai", "gpt-4o-2024-08-06", true, 128_000, 2_500_000},
		{"openai", "gpt-4o-mini-2024-07-18", true, 128_000, 150_000}, // the longest family wins
		{"openai", "gpt-4.1-mini", true, 1_000_000, 400_000},
		{"openai", "llama3.2", false, llm.DefaultContextTokens, 0},
		{"anthropic", "gpt-4o", false, llm.DefaultContextTokens, 0}, // families are per provider
		{"demo", "demo", true, 32_000, 0},
	}
	for _, c := range cases {
		m := llm.Lookup(c.provider, c.model)
		if m.Known != c.known || m.ContextTokens != c.context || m.InputPrice != c.input || m.ID != c.model || m.Provider != c.provider {
			t.Errorf("Lookup(%s, %s) = %+v", c.provider, c.model, m)
		}
	}
	if m := llm.Lookup("openai", "unknown"); m.MaxOutput <= 0 {
		t.Errorf("unknown model has no output cap: %+v", m)
	}
}

func TestCost(t *testing.T) {
	sonnet := llm.Lookup("anthropic", "claude-sonnet-4-5")
	cases := []struct {
		u    llm.Usage
		want int64
	}{
		{llm.Usage{InputTokens: 1_000_000}, 3_000_000},
		{llm.Usage{OutputTokens: 1_000_000}, 15_000_000},
		{llm.Usage{InputTokens: 1_000_000, CachedTokens: 1_000_000}, 300_000},
		{llm.Usage{InputTokens: 2_000, CachedTokens: 1_000, OutputTokens: 500}, 3_000 + 300 + 7_500},
		{llm.Usage{InputTokens: 1}, 3}, // 3 micro-dollars exactly
		{llm.Usage{OutputTokens: 1}, 15},
		{llm.Usage{}, 0},
		{llm.Usage{InputTokens: 10, CachedTokens: 20}, 6}, // cached beyond input: never negative
	}
	for _, c := range cases {
		if got := sonnet.Cost(c.u); got != c.want {
			t.Errorf("Cost(%+v) = %d, want %d", c.u, got, c.want)
		}
	}
	mini := llm.Lookup("openai", "gpt-4o-mini")
	if got := mini.Cost(llm.Usage{InputTokens: 1}); got != 1 { // 0.15 micro-dollars rounds up
		t.Errorf("rounding: %d", got)
	}
	if got := llm.Lookup("openai", "llama3.2").Cost(llm.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}); got != 0 {
		t.Errorf("unknown model cost = %d", got)
	}
}
