// Package llmtest holds test doubles for language models: HTTP servers speaking the Anthropic
// Messages SSE and OpenAI Chat Completions SSE wire formats (NewAnthropicServer,
// NewOpenAIServer), driven by the real SDK clients, and Fake, an in-process llm.Provider playing
// the same scripts without HTTP.
//
// A script is a Reply: either a stream of Steps (Text, ToolCall, Usage, Delay, Wait, Cut, Malformed,
// StreamError, RawEvent) or an HTTP error (Error). Servers answer queued replies first (Enqueue),
// then the responder (SetResponder), then the default reply (SetDefault; initially
// Stream(Text("ok"))). Servers record requests (Requests), count calls (Calls) and the responses
// the client abandoned (Disconnects, WaitDisconnects).
//
// Conformance is the test suite every HTTP provider passes against its server.
package llmtest

import (
	"net/http"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/llm"
)

type stepKind int

const (
	stepText stepKind = iota + 1
	stepToolCall
	stepUsage
	stepDelay
	stepCut
	stepMalformed
	stepError
	stepRaw
	stepWait
)

// Step is one scripted piece of a streamed reply.
type Step struct {
	kind    stepKind
	deltas  []string
	id      string
	name    string
	usage   llm.Usage
	delay   time.Duration
	gate    <-chan struct{}
	errType string
	message string
}

// Text streams s as a text block, split into word-sized deltas ("Hello, world" -> "Hello,",
// " world").
func Text(s string) Step { return Step{kind: stepText, deltas: SplitWords(s)} }

// TextDeltas streams a text block made of exactly these deltas.
func TextDeltas(deltas ...string) Step { return Step{kind: stepText, deltas: deltas} }

// ToolCall streams a tool call: its start (id, name) then argsJSON in pieces of up to 8 bytes.
// An empty argsJSON streams no argument delta.
func ToolCall(id, name, argsJSON string) Step {
	return Step{kind: stepToolCall, id: id, name: name, deltas: splitN(argsJSON, 8)}
}

// Usage sets the token counts the reply reports, in agentry's terms: in counts every input token
// including the cached ones. Each format puts them where the real API does (Anthropic:
// message_start and message_delta, with input_tokens = in - cached and cache_read_input_tokens =
// cached; OpenAI: a final usage chunk when the request asked for stream_options.include_usage).
// Where the step sits in the script does not matter. Without it a reply reports 10 input tokens
// and one output token per 4 characters of content.
func Usage(in, out, cached int64) Step {
	return Step{kind: stepUsage, usage: llm.Usage{InputTokens: in, OutputTokens: out, CachedTokens: cached}}
}

// Delay pauses the stream for d (flushed bytes stay delivered). A client that goes away during
// the pause is counted as a disconnect.
func Delay(d time.Duration) Step { return Step{kind: stepDelay, delay: d} }

// Wait pauses the stream until gate is closed (flushed bytes stay delivered): a test releases
// the model when it is ready for what follows, instead of guessing a delay. A client that goes
// away during the pause is counted as a disconnect.
func Wait(gate <-chan struct{}) Step { return Step{kind: stepWait, gate: gate} }

// Cut drops the connection at this point, without ending the HTTP response.
func Cut() Step { return Step{kind: stepCut} }

// Malformed sends an event whose JSON is broken, then ends the response (without the format's
// end marker).
func Malformed() Step { return Step{kind: stepMalformed} }

// StreamError sends an error inside the stream (Anthropic: an "error" event such as
// overloaded_error; OpenAI: a data line {"error": {...}}), then ends the response.
func StreamError(errType, message string) Step {
	return Step{kind: stepError, errType: errType, message: message}
}

// RawEvent sends one server-sent event verbatim: data is sent as the event's data lines (named
// event when not empty), e.g. to reproduce a compatible server's quirks. It counts toward no
// derived fact (stop reason, usage).
func RawEvent(event, data string) Step { return Step{kind: stepRaw, name: event, message: data} }

// Reply is what a server answers to one request: a stream of Steps, or an HTTP error when Status
// is set.
type Reply struct {
	Steps []Step
	// StopReason overrides the stop reason sent at the end of the stream. The default is tool_use
	// when the reply has a tool call, else end_turn. agentry's names are translated to the
	// format's (OpenAI: stop, tool_calls, length); any other string is sent verbatim.
	StopReason llm.StopReason
	// HeaderDelay delays the response headers (a server that hangs before answering).
	HeaderDelay time.Duration

	// Status, when not 0, makes the reply an HTTP error with Header, and a body in the format's
	// error shape built from ErrorType (default from Status), Code (OpenAI only) and Message, or
	// Body verbatim when set.
	Status    int
	Header    http.Header
	ErrorType string
	Code      string
	Message   string
	Body      string
}

// Stream is a reply streaming steps.
func Stream(steps ...Step) Reply { return Reply{Steps: steps} }

// Error is an HTTP error reply.
func Error(status int, message string) Reply { return Reply{Status: status, Message: message} }

// WithHeader returns r with a response header added (e.g. Retry-After).
func (r Reply) WithHeader(key, value string) Reply {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	r.Header = h
	return r
}

// WithStop returns r with StopReason set.
func (r Reply) WithStop(reason llm.StopReason) Reply {
	r.StopReason = reason
	return r
}

// SplitWords splits s into deltas at word starts, keeping the spaces with the word they precede:
// "Hello, big world" -> "Hello,", " big", " world". Joining the pieces gives s back.
func SplitWords(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' && s[i-1] != ' ' {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func splitN(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// plan is a reply's derived facts.
type plan struct {
	usage    llm.Usage
	hasUsage bool
	hasTool  bool
	stop     llm.StopReason
}

func planOf(r Reply) plan {
	var p plan
	var chars int
	for _, s := range r.Steps {
		switch s.kind {
		case stepUsage:
			p.usage, p.hasUsage = s.usage, true
		case stepToolCall:
			p.hasTool = true
			chars += len(strings.Join(s.deltas, ""))
		case stepText:
			chars += len(strings.Join(s.deltas, ""))
		}
	}
	if !p.hasUsage {
		p.usage = llm.Usage{InputTokens: 10, OutputTokens: int64((chars + 3) / 4)}
	}
	p.stop = r.StopReason
	if p.stop == "" {
		p.stop = llm.StopEndTurn
		if p.hasTool {
			p.stop = llm.StopToolUse
		}
	}
	return p
}

func defaultErrorType(status int) string {
	switch {
	case status == http.StatusBadRequest:
		return "invalid_request_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}
