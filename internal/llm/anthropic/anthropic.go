// Package anthropic is the llm.Provider for Anthropic's Messages API, through anthropic-sdk-go
// with the SDK's own retries off (agentry owns retries).
//
// Usage accounting: Anthropic reports input_tokens without the prompt-cache reads and writes.
// agentry's llm.Usage.InputTokens counts every input token the model processed, so it is
// input_tokens + cache_read_input_tokens + cache_creation_input_tokens, and CachedTokens is
// cache_read_input_tokens (a subset of InputTokens, as for OpenAI's prompt_tokens). Cache writes
// are therefore priced at the plain input price.
//
// Usage is reported by one EventUsage at message_delta (input counts from message_start, output
// from message_delta), so that a stream cut right after message_start has emitted nothing.
// EventDone is sent once the stream has ended cleanly after message_stop.
package anthropic

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

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/agentry/agentry/internal/llm"
)

// Name is the provider's prefix in model references.
const Name = "anthropic"

// DefaultMaxTokens is the output cap sent when a Request sets none (the API requires one).
const DefaultMaxTokens = 4096

// Options configure a Provider.
type Options struct {
	APIKey string
	// BaseURL replaces https://api.anthropic.com (without /v1) when set.
	BaseURL string
	// HTTPClient is used for every call (default: a client without a timeout; calls are bounded
	// by their context).
	HTTPClient *http.Client
}

// Provider calls the Anthropic Messages API.
type Provider struct {
	client sdk.Client
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider. The SDK's environment defaults (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
// profiles) are not read: the caller passes what agentry's configuration says.
func New(o Options) *Provider {
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithAPIKey(o.APIKey),
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	return &Provider{client: sdk.NewClient(opts...)}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return Name }

// Stream implements llm.Provider. Errors of the HTTP answer (status, rate limits) are returned
// here; errors after the first byte come from the stream.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	params, err := buildParams(req)
	if err != nil {
		return nil, &llm.Error{Class: llm.Terminal, Provider: Name, Message: err.Error(), Err: err}
	}
	sctx, cancel := context.WithCancel(ctx)
	var resp *http.Response
	st := p.client.Messages.NewStreaming(sctx, params, option.WithResponseInto(&resp))
	if err := st.Err(); err != nil {
		_ = st.Close()
		cancel()
		return nil, convertError(ctx, err, resp)
	}
	return &stream{ctx: ctx, cancel: cancel, st: st}, nil
}

func buildParams(req llm.Request) (sdk.MessageNewParams, error) {
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: maxTokens,
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, m := range req.Messages {
		blocks := make([]sdk.ContentBlockParamUnion, 0, len(m.Blocks))
		for _, b := range m.Blocks {
			switch b.Type {
			case llm.BlockText:
				if b.Text != "" { // the API rejects empty text blocks
					blocks = append(blocks, sdk.NewTextBlock(b.Text))
				}
			case llm.BlockToolUse:
				input := json.RawMessage(b.Input)
				if len(strings.TrimSpace(string(input))) == 0 || !json.Valid(input) {
					input = json.RawMessage(`{}`)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(b.ID, input, b.Name))
			case llm.BlockToolResult:
				tr := sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID, IsError: sdk.Bool(b.IsError)}
				if b.Content != "" {
					tr.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Content}}}
				}
				blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &tr})
			case llm.BlockImage:
				blocks = append(blocks, sdk.NewImageBlockBase64(b.MediaType, base64.StdEncoding.EncodeToString(b.Data)))
			default:
				return params, fmt.Errorf("message block of unknown type %q", b.Type)
			}
		}
		if len(blocks) == 0 {
			continue // the API rejects messages without content
		}
		switch m.Role {
		case llm.RoleUser:
			params.Messages = append(params.Messages, sdk.NewUserMessage(blocks...))
		case llm.RoleAssistant:
			params.Messages = append(params.Messages, sdk.NewAssistantMessage(blocks...))
		default:
			return params, fmt.Errorf("message of unknown role %q", m.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return params, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return params, nil
}

// inputSchema turns a JSON schema object into the SDK's input_schema (type object is implied).
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	var s sdk.ToolInputSchemaParam
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		s.Properties = map[string]any{}
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, fmt.Errorf("parameters are not a JSON schema object: %w", err)
	}
	s.Properties = m["properties"]
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		switch k {
		case "type", "properties", "required":
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

// stream adapts the SDK's event stream to llm.Stream.
type stream struct {
	ctx    context.Context // the caller's: its error explains a failed read
	cancel context.CancelFunc
	st     *ssestream.Stream[sdk.MessageStreamEventUnion]

	pending []llm.Event
	cur     llm.Event
	err     error
	done    bool
	closed  atomic.Bool

	usage    llm.Usage
	stop     llm.StopReason
	sawStop  bool
	toolIdxs map[int64]bool
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
			s.finish(s.st.Err())
			continue
		}
		s.handle(s.st.Current())
	}
}

// finish ends the stream after the SDK stream stopped with err (nil at a clean end).
func (s *stream) finish(err error) {
	s.done = true
	switch {
	case err != nil:
		s.err = convertError(s.ctx, err, nil)
	case !s.sawStop:
		if ctxErr := s.ctx.Err(); ctxErr != nil {
			s.err = convertError(s.ctx, ctxErr, nil)
			return
		}
		s.err = &llm.Error{Class: llm.Transient, Provider: Name, Message: "stream ended before message_stop", Err: io.ErrUnexpectedEOF}
	default:
		stop := s.stop
		if stop == "" {
			stop = llm.StopOther
		}
		s.pending = append(s.pending, llm.Event{Type: llm.EventDone, StopReason: stop})
	}
}

func (s *stream) handle(ev sdk.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.usage.InputTokens = u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		s.usage.CachedTokens = u.CacheReadInputTokens
		s.usage.OutputTokens = u.OutputTokens
	case "content_block_start":
		if ev.ContentBlock.Type == "tool_use" {
			if s.toolIdxs == nil {
				s.toolIdxs = map[int64]bool{}
			}
			s.toolIdxs[ev.Index] = true
			s.pending = append(s.pending, llm.Event{Type: llm.EventToolCallStart, Index: int(ev.Index),
				ToolCallID: ev.ContentBlock.ID, ToolName: ev.ContentBlock.Name})
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				s.pending = append(s.pending, llm.Event{Type: llm.EventTextDelta, Index: int(ev.Index), Text: ev.Delta.Text})
			}
		case "input_json_delta":
			if s.toolIdxs[ev.Index] && ev.Delta.PartialJSON != "" {
				s.pending = append(s.pending, llm.Event{Type: llm.EventToolCallDelta, Index: int(ev.Index), ArgsDelta: ev.Delta.PartialJSON})
			}
		}
	case "message_delta":
		u := ev.Usage
		// message_delta counts are cumulative; newer API versions repeat the input counts.
		if in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens; in > 0 {
			s.usage.InputTokens = in
			s.usage.CachedTokens = u.CacheReadInputTokens
		}
		s.usage.OutputTokens = u.OutputTokens
		s.pending = append(s.pending, llm.Event{Type: llm.EventUsage, Usage: s.usage})
		if ev.Delta.StopReason != "" {
			s.stop = stopReason(string(ev.Delta.StopReason))
		}
	case "message_stop":
		s.sawStop = true
	}
}

func stopReason(r string) llm.StopReason {
	switch r {
	case "end_turn":
		return llm.StopEndTurn
	case "tool_use":
		return llm.StopToolUse
	case "max_tokens":
		return llm.StopMaxTokens
	}
	return llm.StopOther
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
// cause (a read failing because of a deadline is a timeout, not a network fault). resp, when
// known, is the HTTP answer.
func convertError(ctx context.Context, err error, resp *http.Response) *llm.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return withProvider(llm.Classify(ctxErr))
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		typ, msg := parseErrorBody(apiErr.RawJSON())
		if typ == "" {
			typ = string(apiErr.Type())
		}
		if apiErr.StatusCode >= 400 {
			if msg == "" {
				msg = http.StatusText(apiErr.StatusCode)
			}
			var h http.Header
			if apiErr.Response != nil {
				h = apiErr.Response.Header
			}
			return llm.FromHTTP(Name, apiErr.StatusCode, h, withType(typ, msg), err)
		}
		return streamError(typ, msg, err)
	}
	if rest, ok := strings.CutPrefix(err.Error(), "received error while streaming: "); ok {
		typ, msg := parseErrorBody(rest)
		if msg == "" {
			msg = rest
		}
		return streamError(typ, msg, err)
	}
	if resp != nil && resp.StatusCode >= 400 {
		return llm.FromHTTP(Name, resp.StatusCode, resp.Header, err.Error(), err)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) || strings.Contains(err.Error(), "unexpected end of JSON input") {
		return &llm.Error{Class: llm.Transient, Provider: Name, Message: "malformed stream event: " + err.Error(), Err: err}
	}
	return withProvider(llm.Classify(err))
}

// streamError classifies an error event inside a 200 stream by its type: overload, rate limits
// and server errors are transient; credentials and permissions terminal; an invalid request is
// recoverable when it is about the context length, else terminal.
func streamError(typ, msg string, err error) *llm.Error {
	status := map[string]int{
		"invalid_request_error": http.StatusBadRequest,
		"authentication_error":  http.StatusUnauthorized,
		"billing_error":         http.StatusPaymentRequired,
		"permission_error":      http.StatusForbidden,
		"not_found_error":       http.StatusNotFound,
		"request_too_large":     http.StatusRequestEntityTooLarge,
		"rate_limit_error":      http.StatusTooManyRequests,
		"timeout_error":         http.StatusGatewayTimeout,
		"api_error":             http.StatusInternalServerError,
		"overloaded_error":      529,
	}[typ]
	if status == 0 {
		status = http.StatusInternalServerError // unknown: transient
	}
	if msg == "" {
		msg = "error event in stream"
	}
	e := llm.FromHTTP(Name, status, nil, withType(typ, msg), err)
	e.Status = 0 // the HTTP status was 200; the class comes from the error type
	return e
}

func withType(typ, msg string) string {
	if typ == "" {
		return msg
	}
	return typ + ": " + msg
}

// parseErrorBody reads {"type":"error","error":{"type":..., "message":...}}.
func parseErrorBody(raw string) (typ, msg string) {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return "", strings.TrimSpace(raw)
	}
	return body.Error.Type, body.Error.Message
}

func withProvider(e *llm.Error) *llm.Error {
	c := *e
	if c.Provider == "" {
		c.Provider = Name
	}
	return &c
}
