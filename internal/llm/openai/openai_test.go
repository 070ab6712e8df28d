package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/llm/openai"
)

func newProvider(baseURL string) llm.Provider {
	return openai.New(openai.Options{APIKey: "sk-test", BaseURL: baseURL})
}

func TestConformance(t *testing.T) {
	llmtest.Conformance(t, llmtest.NewOpenAIServer, newProvider)
}

func collect(t *testing.T, p llm.Provider, req llm.Request) llm.Response {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := llm.Collect(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestToolRoundTrip(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	p := newProvider(srv.BaseURL())
	srv.Enqueue(
		llmtest.Stream(llmtest.ToolCall("call_01", "list_files", `{"path":"."}`)),
		llmtest.Stream(llmtest.Text("There are two files.")),
	)
	schema := `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`
	req := llm.Request{
		Model:     "gpt-4o-mini",
		System:    "You are agentry.",
		MaxTokens: 500,
		Tools:     []llm.ToolSpec{{Name: "list_files", Description: "List the files.", Parameters: json.RawMessage(schema)}},
		Messages:  []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "list files"}}}},
	}
	first := collect(t, p, req)
	calls := first.ToolCalls()
	if len(calls) != 1 || calls[0].ID != "call_01" || calls[0].Name != "list_files" || string(calls[0].Input) != `{"path":"."}` || first.StopReason != llm.StopToolUse {
		t.Fatalf("reply = %+v", first)
	}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Blocks: first.Blocks},
		llm.Message{Role: llm.RoleUser, Blocks: []llm.Block{
			{Type: llm.BlockToolResult, ToolUseID: "call_01", Content: "a.txt\nb.txt"},
			{Type: llm.BlockText, Text: "And this picture?"},
			{Type: llm.BlockImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
		}},
	)
	second := collect(t, p, req)
	if second.Blocks[0].Text != "There are two files." {
		t.Fatalf("second = %+v", second)
	}

	reqs := srv.Requests()
	r1 := reqs[0]
	if r1.Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("authorization = %q", r1.Header.Get("Authorization"))
	}
	if !reflect.DeepEqual(r1.Body["stream_options"], map[string]any{"include_usage": true}) || r1.Body["stream"] != true {
		t.Fatalf("stream options = %v", r1.Body["stream_options"])
	}
	// A base URL means a compatible server: max_tokens, which all of them know.
	if r1.Body["max_tokens"] != float64(500) || r1.Body["max_completion_tokens"] != nil {
		t.Fatalf("max tokens = %v / %v", r1.Body["max_tokens"], r1.Body["max_completion_tokens"])
	}
	wantTools := roundTrip(t, []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "list_files", "description": "List the files.", "parameters": json.RawMessage(schema),
	}}})
	if !reflect.DeepEqual(r1.Body["tools"], wantTools) {
		t.Fatalf("tools = %v\nwant %v", r1.Body["tools"], wantTools)
	}

	msgs := reqs[1].Messages()
	want := roundTrip(t, []any{
		map[string]any{"role": "system", "content": "You are agentry."},
		map[string]any{"role": "user", "content": "list files"},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"id": "call_01", "type": "function", "function": map[string]any{"name": "list_files", "arguments": `{"path":"."}`},
		}}},
		map[string]any{"role": "tool", "tool_call_id": "call_01", "content": "a.txt\nb.txt"},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "And this picture?"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw=="}},
		}},
	})
	if got := roundTrip(t, msgs); !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", " ")
		wb, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("messages =\n%s\nwant\n%s", gb, wb)
	}
}

func TestEmptyKeyUsesPlaceholder(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	t.Setenv("OPENAI_API_KEY", "from-env")
	p := openai.New(openai.Options{BaseURL: srv.BaseURL()})
	collect(t, p, llm.Request{Model: "llama3.2", Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "x"}}}}})
	if got := srv.LastRequest(t).Header.Get("Authorization"); got != "Bearer agentry-no-key" {
		t.Fatalf("authorization = %q", got)
	}
}

func TestCompatibleServerQuirks(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	p := newProvider(srv.BaseURL())
	chunk := func(delta string) string {
		return `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
	}
	// Two calls both numbered 0 and sent whole, one without an id, then finish_reason "stop"
	// (seen from Ollama and some proxies).
	srv.Enqueue(llmtest.Stream(
		llmtest.RawEvent("", chunk(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]}`)),
		llmtest.RawEvent("", chunk(`{"tool_calls":[{"index":0,"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}`)),
		llmtest.RawEvent("", chunk(`{"tool_calls":[{"index":1,"type":"function","function":{"name":"h","arguments":""}}]}`)),
	).WithStop(llm.StopEndTurn))
	resp := collect(t, p, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "x"}}}}})
	calls := resp.ToolCalls()
	if len(calls) != 3 || resp.StopReason != llm.StopToolUse {
		t.Fatalf("reply = %+v", resp)
	}
	got := [][3]string{}
	for _, c := range calls {
		got = append(got, [3]string{c.ID, c.Name, string(c.Input)})
	}
	want := [][3]string{{"a", "f", `{"x":1}`}, {"b", "g", "{}"}, {"call_2", "h", "{}"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

// redirect sends every request to srv, whatever its host.
type redirect struct{ srv *llmtest.Server }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	u, _ := url.Parse(r.srv.URL)
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
	return http.DefaultTransport.RoundTrip(req)
}

func TestOpenAIProper(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	// No base URL: api.openai.com, reached through a transport that redirects to the server.
	p := openai.New(openai.Options{APIKey: "sk-real", HTTPClient: &http.Client{Transport: redirect{srv}}})
	collect(t, p, llm.Request{Model: "gpt-4o", MaxTokens: 64, Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "x"}}}}})
	r := srv.LastRequest(t)
	if r.Path != "/v1/chat/completions" || r.Body["max_completion_tokens"] != float64(64) || r.Body["max_tokens"] != nil {
		t.Fatalf("path = %s, body = %v", r.Path, r.Body)
	}
}
