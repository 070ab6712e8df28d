package anthropic_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/anthropic"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

func newProvider(baseURL string) llm.Provider {
	return anthropic.New(anthropic.Options{APIKey: "sk-test", BaseURL: baseURL})
}

func TestConformance(t *testing.T) {
	llmtest.Conformance(t, llmtest.NewAnthropicServer, newProvider)
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

// roundTrip re-encodes v so that it compares with decoded JSON.
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
	srv := llmtest.NewAnthropicServer(t)
	p := newProvider(srv.BaseURL())
	srv.Enqueue(
		llmtest.Stream(llmtest.Text("Looking."), llmtest.ToolCall("toolu_01", "list_files", `{"path":"."}`)),
		llmtest.Stream(llmtest.Text("There are two files.")),
	)
	tools := []llm.ToolSpec{{
		Name:        "list_files",
		Description: "List the files of the workspace.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
	}}
	req := llm.Request{
		Model:    "claude-sonnet-4-5",
		System:   "You are agentry.",
		Tools:    tools,
		Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "list files"}}}},
	}
	first := collect(t, p, req)
	calls := first.ToolCalls()
	if len(calls) != 1 || calls[0].ID != "toolu_01" || calls[0].Name != "list_files" || string(calls[0].Input) != `{"path":"."}` {
		t.Fatalf("calls = %+v", calls)
	}

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Blocks: first.Blocks},
		llm.Message{Role: llm.RoleUser, Blocks: []llm.Block{
			{Type: llm.BlockToolResult, ToolUseID: "toolu_01", Content: "a.txt\nb.txt"},
			{Type: llm.BlockImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
		}},
	)
	second := collect(t, p, req)
	if second.Blocks[0].Text != "There are two files." {
		t.Fatalf("second reply = %+v", second.Blocks)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d", len(reqs))
	}
	r1 := reqs[0]
	if r1.Header.Get("X-Api-Key") != "sk-test" || r1.Header.Get("Anthropic-Version") == "" {
		t.Fatalf("headers = %v", r1.Header)
	}
	if r1.Body["max_tokens"] != float64(anthropic.DefaultMaxTokens) || r1.Body["stream"] != true {
		t.Fatalf("max_tokens/stream = %v %v", r1.Body["max_tokens"], r1.Body["stream"])
	}
	if got, want := r1.Body["system"], roundTrip(t, []any{map[string]any{"type": "text", "text": "You are agentry."}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("system = %v", got)
	}
	wantTools := roundTrip(t, []any{map[string]any{
		"name": "list_files", "description": "List the files of the workspace.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}},
			"required": []string{"path"}, "additionalProperties": false},
	}})
	if !reflect.DeepEqual(r1.Body["tools"], wantTools) {
		t.Fatalf("tools = %v\nwant %v", r1.Body["tools"], wantTools)
	}

	msgs := reqs[1].Messages()
	if len(msgs) != 3 {
		t.Fatalf("messages = %v", msgs)
	}
	wantAssistant := roundTrip(t, map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "text", "text": "Looking."},
		map[string]any{"type": "tool_use", "id": "toolu_01", "name": "list_files", "input": map[string]any{"path": "."}},
	}})
	if !reflect.DeepEqual(any(msgs[1]), wantAssistant) {
		t.Fatalf("assistant message = %v\nwant %v", msgs[1], wantAssistant)
	}
	wantResult := roundTrip(t, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_01", "is_error": false,
			"content": []any{map[string]any{"type": "text", "text": "a.txt\nb.txt"}}},
		map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
	}})
	if !reflect.DeepEqual(any(msgs[2]), wantResult) {
		t.Fatalf("tool result message = %v\nwant %v", msgs[2], wantResult)
	}
}

func TestRequestShape(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	p := newProvider(srv.BaseURL())
	collect(t, p, llm.Request{
		Model:     "claude-haiku-4-5",
		MaxTokens: 123,
		Tools:     []llm.ToolSpec{{Name: "noop", Description: "does nothing"}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: ""}}}, // empty: dropped
			{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "hi"}}},
			{Role: llm.RoleAssistant, Blocks: []llm.Block{{Type: llm.BlockToolUse, ID: "t1", Name: "noop"}}},
			{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: "t1", IsError: true}}},
		},
	})
	r := srv.LastRequest(t)
	if r.Body["max_tokens"] != float64(123) || r.Body["system"] != nil {
		t.Fatalf("body = %v", r.Body)
	}
	msgs := r.Messages()
	if len(msgs) != 3 {
		t.Fatalf("messages = %v", msgs)
	}
	use := msgs[1]["content"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(use["input"], map[string]any{}) {
		t.Fatalf("tool_use without input = %v", use)
	}
	res := msgs[2]["content"].([]any)[0].(map[string]any)
	if res["is_error"] != true || res["content"] != nil {
		t.Fatalf("tool_result = %v", res)
	}
	tool := r.Body["tools"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(tool["input_schema"], map[string]any{"type": "object", "properties": map[string]any{}}) {
		t.Fatalf("tool = %v", tool)
	}
}

func TestEnvironmentIgnored(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	t.Setenv("ANTHROPIC_API_KEY", "from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	p := anthropic.New(anthropic.Options{APIKey: "configured", BaseURL: srv.BaseURL()})
	collect(t, p, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "x"}}}}})
	if got := srv.LastRequest(t).Header.Get("X-Api-Key"); got != "configured" {
		t.Fatalf("x-api-key = %q", got)
	}
}
