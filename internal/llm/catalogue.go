package llm

import (
	"regexp"
	"strings"
)

// snapshotSuffix matches what follows a model family's id in a dated snapshot or alias:
// claude-sonnet-4-5-20250929, gpt-4o-2024-08-06, claude-3-7-sonnet-latest.
var snapshotSuffix = regexp.MustCompile(`^(\d{8}|\d{4}-\d{2}-\d{2}|latest)$`)

// Model describes a model: its context window, output cap and prices in micro-dollars per
// million tokens (so $3.00 / MTok is 3_000_000).
type Model struct {
	Provider      string
	ID            string
	ContextTokens int
	MaxOutput     int
	InputPrice    int64 // micro-dollars per million input tokens
	OutputPrice   int64 // micro-dollars per million output tokens
	CachedPrice   int64 // micro-dollars per million cached input tokens
	Vision        bool
	// Known is false for models agentry has no entry for (safe defaults are used).
	Known bool
}

// DefaultContextTokens is the context window assumed for unknown models: small enough to be
// safe on any current model.
const DefaultContextTokens = 32_000

var catalogue = []Model{
	{Provider: "anthropic", ID: "claude-sonnet-4-5", ContextTokens: 200_000, MaxOutput: 64_000, InputPrice: 3_000_000, OutputPrice: 15_000_000, CachedPrice: 300_000, Vision: true},
	{Provider: "anthropic", ID: "claude-sonnet-4", ContextTokens: 200_000, MaxOutput: 64_000, InputPrice: 3_000_000, OutputPrice: 15_000_000, CachedPrice: 300_000, Vision: true},
	{Provider: "anthropic", ID: "claude-haiku-4-5", ContextTokens: 200_000, MaxOutput: 64_000, InputPrice: 1_000_000, OutputPrice: 5_000_000, CachedPrice: 100_000, Vision: true},
	{Provider: "anthropic", ID: "claude-opus-4", ContextTokens: 200_000, MaxOutput: 32_000, InputPrice: 15_000_000, OutputPrice: 75_000_000, CachedPrice: 1_500_000, Vision: true},
	{Provider: "anthropic", ID: "claude-opus-4-5", ContextTokens: 200_000, MaxOutput: 64_000, InputPrice: 5_000_000, OutputPrice: 25_000_000, CachedPrice: 500_000, Vision: true},
	{Provider: "anthropic", ID: "claude-opus-4-1", ContextTokens: 200_000, MaxOutput: 32_000, InputPrice: 15_000_000, OutputPrice: 75_000_000, CachedPrice: 1_500_000, Vision: true},
	{Provider: "google", ID: "gemini-2.0-flash", ContextTokens: 1_000_000, MaxOutput: 8_192, InputPrice: 100_000, OutputPrice: 400_000, CachedPrice: 25_000, Vision: true},
	{Provider: "google", ID: "gemini-2.5-pro", ContextTokens: 1_000_000, MaxOutput: 65_536, InputPrice: 1_250_000, OutputPrice: 10_000_000, CachedPrice: 310_000, Vision: true},
	{Provider: "openai", ID: "gpt-4o", ContextTokens: 128_000, MaxOutput: 16_384, InputPrice: 2_500_000, OutputPrice: 10_000_000, CachedPrice: 1_250_000, Vision: true},
	{Provider: "openai", ID: "gpt-4o-mini", ContextTokens: 128_000, MaxOutput: 16_384, InputPrice: 150_000, OutputPrice: 600_000, CachedPrice: 75_000, Vision: true},
	{Provider: "openai", ID: "gpt-4.1", ContextTokens: 1_000_000, MaxOutput: 32_768, InputPrice: 2_000_000, OutputPrice: 8_000_000, CachedPrice: 500_000, Vision: true},
	{Provider: "openai", ID: "gpt-4.1-nano", ContextTokens: 1_000_000, MaxOutput: 32_768, InputPrice: 100_000, OutputPrice: 400_000, CachedPrice: 25_000, Vision: true},
	{Provider: "openai", ID: "gpt-5", ContextTokens: 400_000, MaxOutput: 128_000, InputPrice: 1_250_000, OutputPrice: 10_000_000, CachedPrice: 125_000, Vision: true},
	{Provider: "openai", ID: "gpt-5-mini", ContextTokens: 400_000, MaxOutput: 128_000, InputPrice: 250_000, OutputPrice: 2_000_000, CachedPrice: 25_000, Vision: true},
	{Provider: "openai", ID: "gpt-4.1-mini", ContextTokens: 1_000_000, MaxOutput: 32_768, InputPrice: 400_000, OutputPrice: 1_600_000, CachedPrice: 100_000, Vision: true},
	{Provider: "demo", ID: "demo", ContextTokens: 32_000, MaxOutput: 4_096},
}

// Lookup returns the catalogue entry of provider:model. Dated snapshots ("claude-sonnet-4-5-20250929",
// "gpt-4o-2024-08-06") and "-latest" aliases match their family, nothing else does (so
// claude-opus-4-5 is never priced as claude-opus-4); unknown models get Known false, the default
// context window and no price.
func Lookup(provider, model string) Model {
	best := -1
	for i, m := range catalogue {
		if m.Provider != provider && !(provider == "openai" && m.Provider == "google") {
			continue
		}
		if model == m.ID || (strings.HasPrefix(model, m.ID+"-") && snapshotSuffix.MatchString(model[len(m.ID)+1:])) {
			if best < 0 || len(m.ID) > len(catalogue[best].ID) {
				best = i
			}
		}
	}
	if best < 0 {
		return Model{Provider: provider, ID: model, ContextTokens: DefaultContextTokens, MaxOutput: 4_096}
	}
	m := catalogue[best]
	m.Known = true
	m.Provider, m.ID = provider, model
	return m
}

// Cost returns the price of u on m in micro-dollars, rounding up.
func (m Model) Cost(u Usage) int64 {
	uncached := u.InputTokens - u.CachedTokens
	if uncached < 0 {
		uncached = 0
	}
	total := uncached*m.InputPrice + u.CachedTokens*m.CachedPrice + u.OutputTokens*m.OutputPrice
	return (total + 999_999) / 1_000_000
}
