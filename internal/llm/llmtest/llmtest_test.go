package llmtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// post sends body to srv and returns the response.
func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads SSE events as "name data" lines (name empty for OpenAI).
func events(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			out = append(out, strings.TrimSpace(name+" "+strings.TrimPrefix(line, "data: ")))
			name = ""
		}
	}
	return out
}

func TestAnthropicWireFormat(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Stream(llmtest.Text("Hi there"), llmtest.ToolCall("toolu_1", "f", `{"a":1}`), llmtest.Usage(30, 9, 10)))
	resp := post(t, srv.BaseURL()+"/v1/messages", `{"model":"claude-x","stream":true,"max_tokens":10,"messages":[]}`)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, ct)
	}
	evs := events(t, resp)
	var names []string
	for _, e := range evs {
		names = append(names, strings.SplitN(e, " ", 2)[0])
	}
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("events = %v", names)
	}
	var start struct {
		Message struct {
			Model string
			Usage map[string]int
		}
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(evs[0], "message_start ")), &start); err != nil {
		t.Fatal(err)
	}
	if start.Message.Model != "claude-x" || start.Message.Usage["input_tokens"] != 20 || start.Message.Usage["cache_read_input_tokens"] != 10 {
		t.Fatalf("message_start = %s", evs[0])
	}
	if !strings.Contains(evs[9], `"stop_reason":"tool_use"`) || !strings.Contains(evs[9], `"output_tokens":9`) {
		t.Fatalf("message_delta = %s", evs[9])
	}
	if !strings.Contains(evs[7], `"partial_json":"{\"a\":1}"`) {
		t.Fatalf("input_json_delta = %s", evs[7])
	}
}

func TestOpenAIWireFormat(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.SetDefault(llmtest.Stream(llmtest.TextDeltas("a", "b"), llmtest.Usage(5, 2, 1)))
	with := events(t, post(t, srv.BaseURL()+"/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	without := events(t, post(t, srv.BaseURL()+"/chat/completions", `{"model":"m","stream":true,"messages":[]}`))
	if len(with) != 6 || len(without) != 5 || with[len(with)-1] != "[DONE]" || without[len(without)-1] != "[DONE]" {
		t.Fatalf("with usage: %v\nwithout: %v", with, without)
	}
	if !strings.Contains(with[3], `"finish_reason":"stop"`) || !strings.Contains(with[4], `"prompt_tokens":5`) || !strings.Contains(with[4], `"cached_tokens":1`) {
		t.Fatalf("chunks = %v", with)
	}
}

func TestScriptOrderAndRecording(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Error(418, "queued"))
	srv.SetResponder(func(r llmtest.Request) llmtest.Reply {
		if r.Model() == "err" {
			return llmtest.Error(400, "from responder")
		}
		return llmtest.Stream(llmtest.Text("responder"))
	})
	url := srv.BaseURL() + "/chat/completions"
	if r := post(t, url, `{"model":"err","stream":true}`); r.StatusCode != 418 {
		t.Fatalf("queued: %d", r.StatusCode)
	}
	if r := post(t, url, `{"model":"err","stream":true}`); r.StatusCode != 400 {
		t.Fatalf("responder: %d", r.StatusCode)
	}
	srv.SetResponder(nil)
	srv.SetDefault(llmtest.Error(503, "default"))
	if r := post(t, url, `{"model":"m","stream":true}`); r.StatusCode != 503 {
		t.Fatalf("default: %d", r.StatusCode)
	}
	if r := post(t, srv.URL+"/v1/completions", `{"stream":true}`); r.StatusCode != 404 {
		t.Fatalf("wrong path: %d", r.StatusCode)
	}
	srv.SetDefault(llmtest.Stream(llmtest.Text("x")))
	if r := post(t, url, `{"model":"m"}`); r.StatusCode != 400 {
		t.Fatalf("not streaming: %d", r.StatusCode)
	}
	reqs := srv.Requests()
	if srv.Calls() != 5 || len(reqs) != 5 || reqs[0].Model() != "err" || reqs[0].Header.Get("Content-Type") != "application/json" || reqs[0].Method != "POST" {
		t.Fatalf("requests = %+v", reqs)
	}
}

func TestFirstByteIsImmediate(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Stream(llmtest.Text("now"), llmtest.Delay(10*time.Second), llmtest.Text("later")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/messages", strings.NewReader(`{"model":"m","stream":true}`))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"text":"now"`) {
			break
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("first text after %s", d)
	}
	cancel()
	if !srv.WaitDisconnects(1, 5*time.Second) {
		t.Fatal("no disconnect seen")
	}
}

func TestSplitWords(t *testing.T) {
	got := llmtest.SplitWords("Hello,  big world ")
	if strings.Join(got, "") != "Hello,  big world " || got[0] != "Hello," || len(got) != 4 {
		t.Fatalf("%q", got)
	}
}

func TestFake(t *testing.T) {
	f := llmtest.NewFake("")
	f.Enqueue(
		llmtest.Stream(llmtest.Text("Hi"), llmtest.ToolCall("c1", "list_files", `{"path":"."}`), llmtest.Usage(10, 3, 0)),
		llmtest.Error(429, "slow down").WithHeader("Retry-After", "3"),
		llmtest.Stream(llmtest.Text("partial"), llmtest.Cut()),
		llmtest.Stream(llmtest.StreamError("overloaded_error", "Overloaded")),
	)
	req := llm.Request{Model: "x"}
	collect := func(ctx context.Context) (llm.Response, error) {
		s, err := f.Stream(ctx, req)
		if err != nil {
			return llm.Response{}, err
		}
		return llm.Collect(s, nil)
	}
	resp, err := collect(context.Background())
	if err != nil || resp.Blocks[0].Text != "Hi" || resp.ToolCalls()[0].ID != "c1" || string(resp.ToolCalls()[0].Input) != `{"path":"."}` ||
		resp.StopReason != llm.StopToolUse || resp.Usage.InputTokens != 10 {
		t.Fatalf("reply = %+v, %v", resp, err)
	}
	var e *llm.Error
	if _, err := collect(context.Background()); !errors.As(err, &e) || e.Class != llm.Transient || e.RetryAfter != 3*time.Second {
		t.Fatalf("429: %v", err)
	}
	resp, err = collect(context.Background())
	if !errors.As(err, &e) || e.Class != llm.Transient || !e.Emitted || resp.Blocks[0].Text != "partial" {
		t.Fatalf("cut: %+v %v", resp, err)
	}
	if _, err := collect(context.Background()); !errors.As(err, &e) || e.Class != llm.Transient || e.Emitted {
		t.Fatalf("stream error: %v", err)
	}
	f.SetDefault(llmtest.Stream(llmtest.Text("slow"), llmtest.Delay(time.Minute)))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := collect(ctx); !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Class != llm.Transient {
		t.Fatalf("hung: %v", err)
	}
	if f.Calls() != 5 || f.Aborted() != 1 || f.Requests()[0].Model != "x" {
		t.Fatalf("calls = %d, aborted = %d", f.Calls(), f.Aborted())
	}
}
