package contextwin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
)

// benchHistory is a conversation of n messages of about 400 characters each, stored as the
// executor stores them (parts as JSON blocks).
func benchHistory(n int) []dbsqlc.Message {
	out := make([]dbsqlc.Message, n)
	text := strings.Repeat("alpha bravo charlie delta ", 16)
	for i := range out {
		role := "USER"
		if i%2 == 1 {
			role = "ASSISTANT"
		}
		parts, _ := json.Marshal([]llm.Block{{Type: llm.BlockText, Text: text}})
		out[i] = dbsqlc.Message{ID: uuid.Must(uuid.NewV7()), Role: role, Content: text, Parts: parts, Position: int64(i)}
	}
	return out
}

// BenchmarkEstimateHistory is the context window's estimate of a whole history (what Apply
// computes on every model call).
func BenchmarkEstimateHistory(b *testing.B) {
	for _, n := range []int{20, 200} {
		hist := benchHistory(n)
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				total := 0
				for _, m := range hist {
					total += EstimateMessage(m)
				}
				if total == 0 {
					b.Fatal("no estimate")
				}
			}
		})
	}
}

// BenchmarkApplyFits is the window manager on a history that fits the model's context (the
// common case: nothing to summarise, no model call).
func BenchmarkApplyFits(b *testing.B) {
	m := New(Options{})
	model := llm.Lookup("openai", "gpt-4o-mini")
	for _, n := range []int{20, 200} {
		hist := benchHistory(n)
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := m.Apply(context.Background(), Input{Model: model, System: "You are agentry.", History: hist})
				if err != nil {
					b.Fatal(err)
				}
				if w.Applied != nil {
					b.Fatal("a history that fits was summarised")
				}
			}
		})
	}
}
