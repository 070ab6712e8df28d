package llmtest

import (
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/llm"
)

// openaiFormat speaks the OpenAI Chat Completions streaming format.
type openaiFormat struct{}

func (openaiFormat) basePath() string { return "/v1" }
func (openaiFormat) path() string     { return "/chat/completions" }

func (openaiFormat) errorBody(r Reply) []byte {
	typ := r.ErrorType
	if typ == "" {
		typ = map[int]string{400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
			404: "invalid_request_error", 429: "requests"}[r.Status]
		if typ == "" {
			typ = "server_error"
		}
	}
	var code any
	if r.Code != "" {
		code = r.Code
	}
	b, _ := json.Marshal(map[string]any{
		"error": map[string]any{"message": r.Message, "type": typ, "param": nil, "code": code},
	})
	return b
}

func (openaiFormat) streamer(req Request, r Reply) streamer {
	st := &openaiStreamer{model: req.Model(), plan: planOf(r), id: fmt.Sprintf("chatcmpl-llmtest-%d", messageSeq.Add(1))}
	if so, ok := req.Body["stream_options"].(map[string]any); ok {
		st.includeUsage = so["include_usage"] == true
	}
	return st
}

type openaiStreamer struct {
	model        string
	id           string
	plan         plan
	includeUsage bool
	tools        int
}

func (o *openaiStreamer) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": o.id, "object": "chat.completion.chunk", "created": 1700000000, "model": o.model,
		"system_fingerprint": "fp_llmtest",
		"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
}

func (o *openaiStreamer) start(w *sseWriter) bool {
	return w.event("", o.chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
}

func (o *openaiStreamer) text(w *sseWriter, deltas []string) bool {
	for _, d := range deltas {
		if !w.event("", o.chunk(map[string]any{"content": d}, nil)) {
			return false
		}
	}
	return true
}

func (o *openaiStreamer) toolCall(w *sseWriter, step Step) bool {
	i := o.tools
	o.tools++
	if !w.event("", o.chunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": i, "id": step.id, "type": "function",
		"function": map[string]any{"name": step.name, "arguments": ""},
	}}}, nil)) {
		return false
	}
	for _, d := range step.deltas {
		if !w.event("", o.chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": d},
		}}}, nil)) {
			return false
		}
	}
	return true
}

func (o *openaiStreamer) end(w *sseWriter) bool {
	if !w.event("", o.chunk(map[string]any{}, openaiStop(o.plan.stop))) {
		return false
	}
	if o.includeUsage {
		u := o.plan.usage
		if !w.event("", map[string]any{
			"id": o.id, "object": "chat.completion.chunk", "created": 1700000000, "model": o.model,
			"choices": []any{},
			"usage": map[string]any{
				"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens,
				"total_tokens":          u.InputTokens + u.OutputTokens,
				"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
			},
		}) {
			return false
		}
	}
	return w.eventRaw("", "[DONE]")
}

func (o *openaiStreamer) malformed(w *sseWriter) {
	w.eventRaw("", fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"broken`, o.id))
}

func (o *openaiStreamer) streamError(w *sseWriter, step Step) {
	w.event("", map[string]any{"error": map[string]any{"message": step.message, "type": step.errType, "param": nil, "code": nil}})
}

// openaiStop translates agentry's stop reasons to OpenAI's finish_reason.
func openaiStop(s llm.StopReason) string {
	switch s {
	case llm.StopEndTurn:
		return "stop"
	case llm.StopToolUse:
		return "tool_calls"
	case llm.StopMaxTokens:
		return "length"
	}
	return string(s)
}
