package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/llm"
)

// Conformance runs the behaviour every HTTP provider must have against a fresh server from
// newServer per case, with the provider newProvider builds for that server's BaseURL: streamed
// text and usage, tool calls, error classification (429 with Retry-After, 5xx, 401, context
// length) with exactly one request (no SDK retry), cut and malformed streams, hung streams and
// early Close aborting the connection. Provider packages add the checks of their wire format.
func Conformance(t *testing.T, newServer func(testing.TB) *Server, newProvider func(baseURL string) llm.Provider) {
	setup := func(t *testing.T) (*Server, llm.Provider) {
		srv := newServer(t)
		return srv, newProvider(srv.BaseURL())
	}
	req := llm.Request{
		Model:    "test-model",
		System:   "You are terse.",
		Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "Say hello"}}}},
	}
	collect := func(ctx context.Context, p llm.Provider) (llm.Response, []llm.Event, error) {
		var events []llm.Event
		s, err := p.Stream(ctx, req)
		if err != nil {
			return llm.Response{}, nil, err
		}
		resp, err := llm.Collect(s, func(e llm.Event) { events = append(events, e) })
		return resp, events, err
	}
	classified := func(t *testing.T, err error, class llm.Class) *llm.Error {
		t.Helper()
		var e *llm.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
		}
		if e.Class != class {
			t.Fatalf("class = %s, want %s (error: %v)", e.Class, class, e)
		}
		return e
	}

	t.Run("text", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(TextDeltas("Hel", "lo, ", "wor", "ld"), Usage(120, 7, 100)))
		resp, events, err := collect(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var deltas []string
		for _, e := range events {
			if e.Type == llm.EventTextDelta {
				deltas = append(deltas, e.Text)
			}
		}
		if want := []string{"Hel", "lo, ", "wor", "ld"}; !reflect.DeepEqual(deltas, want) {
			t.Fatalf("deltas = %q, want %q", deltas, want)
		}
		if got := events[len(events)-1]; got.Type != llm.EventDone || got.StopReason != llm.StopEndTurn {
			t.Fatalf("last event = %+v, want EventDone end_turn", got)
		}
		if len(resp.Blocks) != 1 || resp.Blocks[0].Text != "Hello, world" {
			t.Fatalf("blocks = %+v", resp.Blocks)
		}
		if want := (llm.Usage{InputTokens: 120, OutputTokens: 7, CachedTokens: 100}); resp.Usage != want {
			t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
		}
		if resp.StopReason != llm.StopEndTurn || srv.Calls() != 1 {
			t.Fatalf("stop = %s, calls = %d", resp.StopReason, srv.Calls())
		}
		if m := srv.LastRequest(t).Model(); m != "test-model" {
			t.Fatalf("model sent = %q", m)
		}
	})

	t.Run("tool calls", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("Let me look."),
			ToolCall("call_a", "list_files", `{"path":"src","recursive":true}`),
			ToolCall("call_b", "read_file", `{"path":"README.md"}`),
			Usage(50, 20, 0)))
		resp, events, err := collect(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		started := map[int]bool{}
		for _, e := range events {
			switch e.Type {
			case llm.EventToolCallStart:
				started[e.Index] = true
			case llm.EventToolCallDelta:
				if !started[e.Index] {
					t.Fatalf("argument delta for tool call %d before its start", e.Index)
				}
			}
		}
		calls := resp.ToolCalls()
		if len(calls) != 2 || resp.StopReason != llm.StopToolUse {
			t.Fatalf("calls = %+v, stop = %s", calls, resp.StopReason)
		}
		want := []struct{ id, name, args string }{
			{"call_a", "list_files", `{"path":"src","recursive":true}`},
			{"call_b", "read_file", `{"path":"README.md"}`},
		}
		for i, w := range want {
			if calls[i].ID != w.id || calls[i].Name != w.name || !jsonEqual(calls[i].Input, w.args) {
				t.Fatalf("call %d = %s %s %s, want %+v", i, calls[i].ID, calls[i].Name, calls[i].Input, w)
			}
		}
		if resp.Blocks[0].Type != llm.BlockText || resp.Blocks[0].Text != "Let me look." {
			t.Fatalf("first block = %+v", resp.Blocks[0])
		}
	})

	t.Run("max tokens", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("cut short")).WithStop(llm.StopMaxTokens))
		resp, _, err := collect(context.Background(), p)
		if err != nil || resp.StopReason != llm.StopMaxTokens {
			t.Fatalf("stop = %s, err = %v", resp.StopReason, err)
		}
	})

	httpCases := []struct {
		name    string
		reply   Reply
		class   llm.Class
		retry   time.Duration
		ctxLen  bool
		wantMsg string
	}{
		{"429 retry-after", Error(429, "rate limited").WithHeader("Retry-After", "2"), llm.Transient, 2 * time.Second, false, "rate limited"},
		{"500", Error(500, "internal error"), llm.Transient, 0, false, "internal error"},
		{"503 retry-after-ms", Error(503, "unavailable").WithHeader("Retry-After-Ms", "1500"), llm.Transient, 1500 * time.Millisecond, false, "unavailable"},
		{"529 overloaded", Error(529, "Overloaded"), llm.Transient, 0, false, "Overloaded"},
		{"502 html", Reply{Status: 502, Body: "<html>bad gateway</html>", Header: http.Header{"Content-Type": {"text/html"}}}, llm.Transient, 0, false, ""},
		{"401", Error(401, "invalid x-api-key"), llm.Terminal, 0, false, "invalid x-api-key"},
		{"403", Error(403, "forbidden"), llm.Terminal, 0, false, "forbidden"},
		{"400 context length", Reply{Status: 400, Message: "prompt is too long: 210000 tokens > 200000 maximum", Code: "context_length_exceeded"}, llm.Recoverable, 0, true, "prompt is too long"},
		{"400 invalid", Error(400, "messages: field required"), llm.Terminal, 0, false, "field required"},
	}
	for _, tc := range httpCases {
		t.Run(tc.name, func(t *testing.T) {
			srv, p := setup(t)
			srv.Enqueue(tc.reply)
			_, _, err := collect(context.Background(), p)
			e := classified(t, err, tc.class)
			if e.Status != tc.reply.Status || e.RetryAfter != tc.retry || e.ContextLength != tc.ctxLen || e.Emitted {
				t.Fatalf("error = %+v", e)
			}
			if !strings.Contains(e.Message, tc.wantMsg) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.wantMsg)
			}
			if e.Provider == "" {
				t.Fatalf("provider not set: %+v", e)
			}
			if n := srv.Calls(); n != 1 {
				t.Fatalf("server saw %d requests, want 1 (the SDK must not retry)", n)
			}
		})
	}

	t.Run("cut after text", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("partial answer"), Cut(), Text("never")))
		resp, _, err := collect(context.Background(), p)
		e := classified(t, err, llm.Transient)
		if !e.Emitted {
			t.Fatalf("Emitted = false: %+v", e)
		}
		if len(resp.Blocks) != 1 || resp.Blocks[0].Text != "partial answer" {
			t.Fatalf("partial reply = %+v", resp.Blocks)
		}
		if srv.Calls() != 1 {
			t.Fatalf("calls = %d", srv.Calls())
		}
	})

	t.Run("cut before output", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Cut()))
		_, _, err := collect(context.Background(), p)
		e := classified(t, err, llm.Transient)
		if e.Emitted || srv.Calls() != 1 {
			t.Fatalf("error = %+v, calls = %d", e, srv.Calls())
		}
	})

	t.Run("cut inside tool arguments", func(t *testing.T) {
		srv, p := setup(t)
		// The call starts, part of its arguments arrive, then the connection drops.
		srv.Enqueue(Stream(ToolCall("call_x", "write_file", `{"path":"a.txt","content":"hello"}`), Cut()))
		_, _, err := collect(context.Background(), p)
		if e := classified(t, err, llm.Transient); !e.Emitted {
			t.Fatalf("Emitted = false: %+v", e)
		}
	})

	t.Run("malformed chunk", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("some"), Malformed()))
		resp, _, err := collect(context.Background(), p)
		e := classified(t, err, llm.Transient)
		if !e.Emitted || resp.Blocks[0].Text != "some" {
			t.Fatalf("error = %+v, blocks = %+v", e, resp.Blocks)
		}
	})

	t.Run("malformed first chunk", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Malformed()))
		_, _, err := collect(context.Background(), p)
		if e := classified(t, err, llm.Transient); e.Emitted {
			t.Fatalf("Emitted = true: %+v", e)
		}
	})

	t.Run("error event in stream", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("hmm"), StreamError("overloaded_error", "Overloaded")))
		_, _, err := collect(context.Background(), p)
		e := classified(t, err, llm.Transient)
		if !e.Emitted || !strings.Contains(e.Message, "Overloaded") {
			t.Fatalf("error = %+v", e)
		}
	})

	t.Run("hung stream times out", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("thinking"), Delay(time.Minute), Text("never")))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, _, err := collect(ctx, p)
		e := classified(t, err, llm.Transient)
		if !errors.Is(err, context.DeadlineExceeded) || !e.Emitted {
			t.Fatalf("error = %+v, want a deadline error with Emitted", e)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %s", d)
		}
		if len(resp.Blocks) != 1 || resp.Blocks[0].Text != "thinking" {
			t.Fatalf("partial = %+v", resp.Blocks)
		}
		if !srv.WaitDisconnects(1, 5*time.Second) {
			t.Fatal("server did not see the connection close")
		}
	})

	t.Run("hung before headers times out", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Reply{HeaderDelay: time.Minute, Steps: []Step{Text("never")}})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, _, err := collect(ctx, p)
		e := classified(t, err, llm.Transient)
		if !errors.Is(err, context.DeadlineExceeded) || e.Emitted || srv.Calls() != 1 {
			t.Fatalf("error = %+v, calls = %d", e, srv.Calls())
		}
		if !srv.WaitDisconnects(1, 5*time.Second) {
			t.Fatal("server did not see the connection close")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("working"), Delay(time.Minute), Text("never")))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := p.Stream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = llm.Collect(s, func(e llm.Event) {
			if e.Type == llm.EventTextDelta {
				cancel()
			}
		})
		e := classified(t, err, llm.Terminal)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %+v, want context.Canceled", e)
		}
		if !srv.WaitDisconnects(1, 5*time.Second) {
			t.Fatal("server did not see the connection close")
		}
	})

	t.Run("close early", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("first"), Delay(time.Minute), Text("never")))
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Next() || s.Event().Type != llm.EventTextDelta {
			t.Fatalf("first event = %+v, err = %v", s.Event(), s.Err())
		}
		if err := s.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		if !srv.WaitDisconnects(1, 5*time.Second) {
			t.Fatal("server did not see the connection close")
		}
		if s.Next() {
			t.Fatal("Next after Close returned true")
		}
	})

	t.Run("close from another goroutine unblocks Next", func(t *testing.T) {
		srv, p := setup(t)
		srv.Enqueue(Stream(Text("first"), Delay(time.Minute), Text("never")))
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Next() {
			t.Fatalf("no first event: %v", s.Err())
		}
		for s.Event().Type != llm.EventTextDelta && s.Next() {
		}
		timer := time.AfterFunc(100*time.Millisecond, func() { _ = s.Close() })
		defer timer.Stop()
		done := make(chan bool)
		go func() { done <- s.Next() }()
		select {
		case more := <-done:
			if more {
				t.Fatalf("Next after Close returned %+v", s.Event())
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Next still blocked after Close")
		}
		if !srv.WaitDisconnects(1, 5*time.Second) {
			t.Fatal("server did not see the connection close")
		}
	})

	t.Run("sequential calls reuse nothing stale", func(t *testing.T) {
		srv, p := setup(t)
		srv.SetResponder(func(r Request) Reply { return Stream(Text("reply " + r.Model())) })
		for i := 0; i < 3; i++ {
			resp, _, err := collect(context.Background(), p)
			if err != nil || len(resp.Blocks) != 1 || resp.Blocks[0].Text != "reply test-model" {
				t.Fatalf("call %d: %+v, %v", i, resp.Blocks, err)
			}
		}
		if srv.Calls() != 3 || srv.Disconnects() != 0 {
			t.Fatalf("calls = %d, disconnects = %d", srv.Calls(), srv.Disconnects())
		}
	})
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
