// Package openai is the llm.Provider for OpenAI Chat Completions, through openai-go/v3 with the
// SDK's own retries off (agentry owns retries). Any OpenAI-compatible server works through
// Options.BaseURL (Ollama, vLLM, llama.cpp, OpenRouter); the API key may then be empty.
//
// Usage: prompt_tokens already includes the cached tokens, so InputTokens is prompt_tokens and
// CachedTokens is prompt_tokens_details.cached_tokens. The usage chunk comes after the chunk
// carrying finish_reason (stream_options.include_usage is always requested), so EventDone is
// sent when the stream has ended cleanly ("data: [DONE]") after a finish_reason.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentry/agentry/internal/llm"
)

// Name is the provider's prefix in model references.
const Name = "openai"

// placeholderKey is sent when no API key is configured (local servers such as Ollama ignore it).
const placeholderKey = "agentry-no-key"

// Options configure a Provider.
type Options struct {
	// APIKey may be empty for local servers.
	APIKey string
	// BaseURL replaces https://api.openai.com/v1 when set (include the /v1).
	BaseURL string
	// HTTPClient is used for every call (default: a client without a timeout; calls are bounded
	// by their context).
	HTTPClient *http.Client
}

// Provider calls an OpenAI-compatible Chat Completions API.
type Provider struct {
	svc oai.ChatCompletionService
	// compat is true for a server other than OpenAI's (BaseURL set): max_tokens is sent instead
	// of max_completion_tokens, which older compatible servers do not know.
	compat bool
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider. The SDK's environment defaults (OPENAI_API_KEY, OPENAI_BASE_URL,
// OPENAI_ORG_ID...) are not read: the caller passes what agentry's configuration says.
func New(o Options) *Provider {
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	key := o.APIKey
	if key == "" {
		key = placeholderKey
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithEnvironmentProduction(),
		option.WithMaxRetries(0),
		option.WithAPIKey(key),
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	// The service is built directly rather than through oai.NewClient, which would read OPENAI_*
	// variables from the environment.
	return &Provider{svc: oai.NewChatCompletionService(opts...), compat: o.BaseURL != ""}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return Name }

// Stream implements llm.Provider. Errors of the HTTP answer (status, rate limits) are returned
// here; errors after the first byte come from the stream.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	params, err := p.buildParams(req)
	if err != nil {
		return nil, &llm.Error{Class: llm.Terminal, Provider: Name, Message: err.Error(), Err: err}
	}
	sctx, cancel := context.WithCancel(ctx)
	var resp *http.Response
	st := p.svc.NewStreaming(sctx, params, option.WithResponseInto(&resp))
	if err := st.Err(); err != nil {
		_ = st.Close()
		cancel()
		return nil, convertError(ctx, err, resp)
	}
	return &stream{ctx: ctx, cancel: cancel, st: st, byIndex: map[int64]*toolCall{}}, nil
}

func (p *Provider) buildParams(req llm.Request) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	}
	if req.MaxTokens > 0 {
		if p.compat {
			params.MaxTokens = oai.Int(int64(req.MaxTokens))
		} else {
			params.MaxCompletionTokens = oai.Int(int64(req.MaxTokens))
		}
	}
	if req.System != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		msgs, err := convertMessage(m)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		fn.Parameters = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if raw := strings.TrimSpace(string(t.Parameters)); raw != "" && raw != "null" {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return params, fmt.Errorf("tool %s: parameters are not a JSON schema object: %w", t.Name, err)
			}
			fn.Parameters = schema
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	return params, nil
}

// convertMessage maps one agentry message to Chat Completions messages: a user message's
// tool_result blocks become "tool" messages (placed first, right after the assistant message
// that called the tools), its text and images a user message; an assistant message's tool_use
// blocks become its tool_calls.
func convertMessage(m llm.Message) ([]oai.ChatCompletionMessageParamUnion, error) {
	var out []oai.ChatCompletionMessageParamUnion
	switch m.Role {
	case llm.RoleUser:
		var parts []oai.ChatCompletionContentPartUnionParam
		hasImage := false
		for _, b := range m.Blocks {
			switch b.Type {
			case llm.BlockToolResult:
				content := b.Content
				if b.IsError {
					content = "Error: " + content
				}
				out = append(out, oai.ToolMessage(content, b.ToolUseID))
			case llm.BlockText:
				if b.Text != "" {
					parts = append(parts, oai.TextContentPart(b.Text))
				}
			case llm.BlockImage:
				hasImage = true
				url := "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
				parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: url}))
			case llm.BlockToolUse:
				return nil, fmt.Errorf("a user message cannot hold a tool_use block")
			default:
				return nil, fmt.Errorf("message block of unknown type %q", b.Type)
			}
		}
		switch {
		case len(parts) == 0:
		case !hasImage:
			// Plain text as a string: understood by every compatible server.
			out = append(out, oai.UserMessage(m.Text()))
		default:
			out = append(out, oai.UserMessage(parts))
		}
	case llm.RoleAssistant:
		var asst oai.ChatCompletionAssistantMessageParam
		if text := m.Text(); text != "" {
			asst.Content.OfString = oai.String(text)
		}
		for _, b := range m.Blocks {
			switch b.Type {
			case llm.BlockText:
			case llm.BlockToolUse:
				args := strings.TrimSpace(string(b.Input))
				if args == "" {
					args = "{}"
				}
				asst.ToolCalls = append(asst.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID:       b.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
					},
				})
			default:
				return nil, fmt.Errorf("an assistant message cannot hold a %q block", b.Type)
			}
		}
		if asst.Content.OfString.Valid() || len(asst.ToolCalls) > 0 {
			out = append(out, oai.ChatCompletionMessageParamUnion{OfAssistant: &asst})
		}
	default:
		return nil, fmt.Errorf("message of unknown role %q", m.Role)
	}
	return out, nil
}

type toolCall struct {
	index int // the llm.Event Index
	id    string
}

// stream adapts the SDK's chunk stream to llm.Stream.
type stream struct {
	ctx    context.Context // the caller's: its error explains a failed read
	cancel context.CancelFunc
	st     *ssestream.Stream[oai.ChatCompletionChunk]

	pending []llm.Event
	cur     llm.Event
	err     error
	done    bool
	closed  atomic.Bool

	finish  string
	usage   *llm.Usage
	byIndex map[int64]*toolCall // by the server's tool call index
	calls   int
}

func (s *stream) Next() bool {
	for {
		if len(s.pending) > 0 {
			s.cur = s.pending[0]
			s.pending = s.pending[1:]
			return true
		}
		if s.done || s.closed.Load() || s.err != nil {
			return false
		}
		if !s.st.Next() {
			s.end(s.st.Err())
			continue
		}
		s.handle(s.st.Current())
	}
}

func (s *stream) end(err error) {
	s.done = true
	switch {
	case err != nil:
		s.err = convertError(s.ctx, err, nil)
	case s.finish == "":
		if ctxErr := s.ctx.Err(); ctxErr != nil {
			s.err = convertError(s.ctx, ctxErr, nil)
			return
		}
		s.err = &llm.Error{Class: llm.Transient, Provider: Name, Message: "stream ended before a finish_reason", Err: io.ErrUnexpectedEOF}
	default:
		if s.usage != nil {
			s.pending = append(s.pending, llm.Event{Type: llm.EventUsage, Usage: *s.usage})
		}
		s.pending = append(s.pending, llm.Event{Type: llm.EventDone, StopReason: s.stopReason()})
	}
}

func (s *stream) stopReason() llm.StopReason {
	switch s.finish {
	case "stop":
		if s.calls > 0 { // some compatible servers say stop after tool calls
			return llm.StopToolUse
		}
		return llm.StopEndTurn
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "length":
		return llm.StopMaxTokens
	}
	return llm.StopOther
}

func (s *stream) handle(c oai.ChatCompletionChunk) {
	if c.JSON.Usage.Valid() && (c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0) {
		s.usage = &llm.Usage{
			InputTokens:  c.Usage.PromptTokens,
			OutputTokens: c.Usage.CompletionTokens,
			CachedTokens: c.Usage.PromptTokensDetails.CachedTokens,
		}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // n is never set above 1
		}
		d := ch.Delta
		if d.Content != "" {
			s.pending = append(s.pending, llm.Event{Type: llm.EventTextDelta, Text: d.Content})
		}
		for _, tc := range d.ToolCalls {
			call := s.byIndex[tc.Index]
			// A new id at a known index is a new call: some servers number every call 0.
			if call == nil || (tc.ID != "" && call.id != "" && tc.ID != call.id) {
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("call_%d", s.calls)
				}
				call = &toolCall{index: s.calls, id: id}
				s.calls++
				s.byIndex[tc.Index] = call
				s.pending = append(s.pending, llm.Event{Type: llm.EventToolCallStart, Index: call.index,
					ToolCallID: id, ToolName: tc.Function.Name})
			}
			if tc.Function.Arguments != "" {
				s.pending = append(s.pending, llm.Event{Type: llm.EventToolCallDelta, Index: call.index, ArgsDelta: tc.Function.Arguments})
			}
		}
		if ch.FinishReason != "" {
			s.finish = ch.FinishReason
		}
	}
}

func (s *stream) Event() llm.Event { return s.cur }

func (s *stream) Err() error {
	if s.err == nil {
		return nil
	}
	return s.err
}

// Close releases the connection; closing before the end aborts the request (the server sees the
// connection close). It may be called from another goroutine to abort a blocked Next.
func (s *stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	return s.st.Close()
}

// convertError classifies err. ctx is the caller's context: when it is done, its error is the
// cause. resp, when known, is the HTTP answer (its status and headers classify errors whose body
// the SDK could not decode, e.g. {"error": "a string"} from Ollama or an HTML 502 from a proxy).
func convertError(ctx context.Context, err error, resp *http.Response) *llm.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return withProvider(llm.Classify(ctxErr))
	}
	var apiErr *oai.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode >= 400 {
		msg := apiErr.Message
		if msg == "" && apiErr.Response != nil {
			msg = bodyMessage(apiErr.Response)
		}
		if apiErr.Code != "" {
			msg += " (" + apiErr.Code + ")"
		}
		if strings.TrimSpace(msg) == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return llm.FromHTTP(Name, apiErr.StatusCode, h, msg, err)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return streamError(se, err)
	}
	if resp != nil && resp.StatusCode >= 400 {
		msg := bodyMessage(resp)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return llm.FromHTTP(Name, resp.StatusCode, resp.Header, msg, err)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) || strings.Contains(err.Error(), "unexpected end of JSON input") {
		return &llm.Error{Class: llm.Transient, Provider: Name, Message: "malformed stream chunk: " + err.Error(), Err: err}
	}
	return withProvider(llm.Classify(err))
}

// streamError classifies {"error": {...}} sent inside a 200 stream (vLLM, OpenRouter): a context
// length error is recoverable, anything else transient.
func streamError(se *ssestream.StreamError, err error) *llm.Error {
	msg := strings.TrimPrefix(se.Message, "received error while streaming: ")
	var body struct {
		Message string `json:"message"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal([]byte(msg), &body) == nil && body.Message != "" {
		msg = body.Message
		if code, ok := body.Code.(string); ok && code != "" {
			msg += " (" + code + ")"
		}
	}
	e := llm.FromHTTP(Name, http.StatusBadRequest, nil, msg, err)
	if !e.ContextLength {
		e.Class = llm.Transient
	}
	e.Status = 0
	return e
}

// bodyMessage reads an error body: {"error": {"message": ...}}, {"error": "..."}, {"message":
// ...} or plain text (cut at 300 bytes).
func bodyMessage(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var s string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(body.Error, &s) == nil && s != "":
			return s
		case json.Unmarshal(body.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case body.Message != "":
			return body.Message
		}
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 300 {
		text = text[:300]
	}
	return text
}

func withProvider(e *llm.Error) *llm.Error {
	c := *e
	if c.Provider == "" {
		c.Provider = Name
	}
	return &c
}
