package graph_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// TestTraceOfATurn: under an in-memory exporter, a turn with a tool call makes one trace: the
// sendMessage operation's span, under it the job's insert, the job's work span (continued from
// the job's metadata in the worker), and under that each model call and the tool call, with the
// Postgres statements along the way.
func TestTraceOfATurn(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	srv := llmtest.NewAnthropicServer(t)
	e := apptest.Start(t, apptest.Options{TracerProvider: tp, Env: map[string]string{
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(),
	}})
	c := &chatEnv{Env: e, llm: srv, model: "anthropic:claude-sonnet-4-5"}
	c.s = e.SignUp(t, "", "")
	var sc script
	sc.install(srv, func(n int, _ llmtest.Request) llmtest.Reply {
		if n == 0 {
			return llmtest.Stream(llmtest.ToolCall("t1", "list_files", `{}`))
		}
		return llmtest.Stream(llmtest.Text("nothing there"))
	})
	c.settings(t, map[string]any{"autoExecute": true})
	conv := c.conversation(t, nil)
	s, _ := c.send(t, conv, "what is there?", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 20*time.Second).Status)

	byID := map[trace.SpanID]tracetest.SpanStub{}
	var op tracetest.SpanStub
	require.Eventually(t, func() bool {
		spans := exp.GetSpans()
		op = tracetest.SpanStub{}
		for _, sp := range spans {
			byID[sp.SpanContext.SpanID()] = sp
		}
		var works int
		for _, sp := range spans {
			if sp.Name == "graphql.mutation" && hasAttr(sp, "graphql.operation.type", "mutation") && isSendMessage(spans, sp) {
				op = sp
			}
			if isWork(sp) {
				works++
			}
		}
		return op.Name != "" && works > 0 && countNamed(spans, "llm.call") >= 2
	}, 10*time.Second, 20*time.Millisecond)
	traceID := op.SpanContext.TraceID()
	descends := func(sp tracetest.SpanStub, ancestor trace.SpanID) bool {
		for i := 0; i < 100; i++ {
			parent := sp.Parent.SpanID()
			if parent == ancestor {
				return true
			}
			p, ok := byID[parent]
			if !ok {
				return false
			}
			sp = p
		}
		return false
	}
	var work tracetest.SpanStub
	var llmCalls, toolCalls, pg int
	for _, sp := range exp.GetSpans() {
		if sp.SpanContext.TraceID() != traceID {
			continue
		}
		switch {
		case isWork(sp):
			work = sp
		case sp.Name == "llm.call":
			llmCalls++
		case sp.Name == "tool.call":
			toolCalls++
			require.True(t, hasAttr(sp, "tool.name", "list_files"))
		case strings.HasPrefix(sp.Name, "query") || strings.Contains(sp.Name, "SELECT") || strings.Contains(sp.Name, "INSERT"):
			pg++
		}
	}
	require.Equal(t, "local.work/run", work.Name, "the turn's work, in this process (it took the message), is in the request's trace")
	require.True(t, descends(work, op.SpanContext.SpanID()), "the job span descends from the request's span")
	require.Equal(t, 2, llmCalls)
	require.Equal(t, 1, toolCalls)
	require.Positive(t, pg, "Postgres statements are traced")
	for _, sp := range exp.GetSpans() {
		if sp.SpanContext.TraceID() == traceID && (sp.Name == "llm.call" || sp.Name == "tool.call") {
			require.True(t, descends(sp, work.SpanContext.SpanID()), "%s under the job's span", sp.Name)
		}
		if sp.Name == "llm.call" && sp.SpanContext.TraceID() == traceID {
			require.True(t, hasAttr(sp, "llm.provider", "anthropic"))
			require.True(t, hasAttr(sp, "llm.model", "claude-sonnet-4-5"))
		}
	}
}

func hasAttr(sp tracetest.SpanStub, key, value string) bool {
	for _, a := range sp.Attributes {
		if string(a.Key) == key && a.Value.String() == value {
			return true
		}
	}
	return false
}

func countNamed(spans tracetest.SpanStubs, name string) int {
	n := 0
	for _, sp := range spans {
		if sp.Name == name {
			n++
		}
	}
	return n
}

// isSendMessage reports whether op (a mutation span) has River's insert or a run's local work
// under it: the one mutation of the test that starts a run.
func isSendMessage(spans tracetest.SpanStubs, op tracetest.SpanStub) bool {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID()] = sp
	}
	for _, sp := range spans {
		if sp.Name != "river.insert_many" && sp.Name != "local.work/run" {
			continue
		}
		for p, ok := sp, true; ok; p, ok = byID[p.Parent.SpanID()] {
			if p.Parent.SpanID() == op.SpanContext.SpanID() {
				return true
			}
		}
	}
	return false
}

// isWork reports whether sp is the span of a run's attempt: a River job's work, or that of a
// chat turn worked by the process that took its message (jobs.Local).
func isWork(sp tracetest.SpanStub) bool {
	return sp.Name == "river.work/run" || sp.Name == "local.work/run"
}
