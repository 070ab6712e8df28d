package llmtest

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
)

var messageSeq atomic.Int64

// anthropicFormat speaks the Anthropic Messages API streaming format.
type anthropicFormat struct{}

func (anthropicFormat) basePath() string { return "" }
func (anthropicFormat) path() string     { return "/v1/messages" }

func (anthropicFormat) errorBody(r Reply) []byte {
	typ := r.ErrorType
	if typ == "" {
		typ = defaultErrorType(r.Status)
	}
	b, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": r.Message},
	})
	return b
}

func (anthropicFormat) streamer(req Request, r Reply) streamer {
	return &anthropicStreamer{model: req.Model(), plan: planOf(r)}
}

type anthropicStreamer struct {
	model string
	plan  plan
	index int
}

func (a *anthropicStreamer) usage(includeOutput bool) map[string]any {
	u := map[string]any{
		"input_tokens":                a.plan.usage.InputTokens - a.plan.usage.CachedTokens,
		"cache_read_input_tokens":     a.plan.usage.CachedTokens,
		"cache_creation_input_tokens": 0,
		"output_tokens":               int64(1),
	}
	if includeOutput {
		u["output_tokens"] = a.plan.usage.OutputTokens
	}
	return u
}

func (a *anthropicStreamer) start(w *sseWriter) bool {
	id := fmt.Sprintf("msg_llmtest_%d", messageSeq.Add(1))
	return w.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": a.model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": a.usage(false),
		},
	}) && w.event("ping", map[string]any{"type": "ping"})
}

func (a *anthropicStreamer) text(w *sseWriter, deltas []string) bool {
	i := a.index
	a.index++
	if !w.event("content_block_start", map[string]any{
		"type": "content_block_start", "index": i,
		"content_block": map[string]any{"type": "text", "text": ""},
	}) {
		return false
	}
	for _, d := range deltas {
		if !w.event("content_block_delta", map[string]any{
			"type": "content_block_delta", "index": i,
			"delta": map[string]any{"type": "text_delta", "text": d},
		}) {
			return false
		}
	}
	return w.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
}

func (a *anthropicStreamer) toolCall(w *sseWriter, step Step) bool {
	i := a.index
	a.index++
	if !w.event("content_block_start", map[string]any{
		"type": "content_block_start", "index": i,
		"content_block": map[string]any{"type": "tool_use", "id": step.id, "name": step.name, "input": map[string]any{}},
	}) {
		return false
	}
	for _, d := range step.deltas {
		if !w.event("content_block_delta", map[string]any{
			"type": "content_block_delta", "index": i,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": d},
		}) {
			return false
		}
	}
	return w.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
}

func (a *anthropicStreamer) end(w *sseWriter) bool {
	stop := string(a.plan.stop)
	return w.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": a.usage(true),
	}) && w.event("message_stop", map[string]any{"type": "message_stop"})
}

func (a *anthropicStreamer) malformed(w *sseWriter) {
	w.eventRaw("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":"broken`, a.index))
}

func (a *anthropicStreamer) streamError(w *sseWriter, step Step) {
	w.event("error", map[string]any{
		"type":  "error",
		"error": map[string]any{"type": step.errType, "message": step.message},
	})
}
