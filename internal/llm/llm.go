// Package llm is agentry's view of language models: a streaming Provider interface, the content
// blocks of a conversation, error classification (TRANSIENT, RECOVERABLE, TERMINAL) and the model
// catalogue (context limits, prices). Providers live in subpackages (anthropic, openai, demo);
// llmtest holds HTTP test servers speaking their wire formats.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Role is who said a message. System prompts travel in Request.System, not as messages.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType names a content block's kind.
type BlockType string

// Content block kinds.
const (
	BlockText       BlockType = "text"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
	BlockImage      BlockType = "image"
)

// Block is one piece of a message's content. Which fields are set depends on Type.
type Block struct {
	Type BlockType `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// ID, Name and Input describe a tool_use block (a call the model made).
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError describe a tool_result block (answering ToolUseID).
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	// MediaType and Data describe an image block (Data is the raw bytes; base64 in JSON).
	MediaType string `json:"media_type,omitempty"`
	Data      []byte `json:"data,omitempty"`
}

// Message is one turn of a conversation.
type Message struct {
	Role   Role    `json:"role"`
	Blocks []Block `json:"blocks"`
}

// Text returns the concatenated text blocks of m.
func (m Message) Text() string {
	var b strings.Builder
	for _, bl := range m.Blocks {
		if bl.Type == BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// ToolSpec offers a tool to the model: its name, what it does and its JSON-schema parameters.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	// Model is the provider's model id (without the "provider:" prefix).
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
}

// EventType names a stream event.
type EventType int

// Stream event kinds.
const (
	// EventTextDelta carries Text, a piece of the reply.
	EventTextDelta EventType = iota + 1
	// EventToolCallStart opens tool call number Index with ToolCallID and ToolName.
	EventToolCallStart
	// EventToolCallDelta carries ArgsDelta, a piece of tool call Index's JSON arguments.
	EventToolCallDelta
	// EventUsage reports token counts so far (the last one wins).
	EventUsage
	// EventDone ends the stream with StopReason.
	EventDone
)

// StopReason says why the model stopped.
type StopReason string

// Stop reasons, normalised across providers.
const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopOther     StopReason = "other"
)

// Usage counts the tokens of one call.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// CachedTokens are input tokens served from the provider's prompt cache (a subset of
	// InputTokens).
	CachedTokens int64
}

// Event is one streamed event.
type Event struct {
	Type       EventType
	Text       string
	Index      int
	ToolCallID string
	ToolName   string
	ArgsDelta  string
	Usage      Usage
	StopReason StopReason
}

// Stream is a model reply arriving piece by piece. Next blocks for the next event and returns
// false at the end or on error (then Err says which); Close releases the connection (closing it
// mid-stream aborts the request).
type Stream interface {
	Next() bool
	Event() Event
	Err() error
	Close() error
}

// Provider calls one kind of model API. Implementations turn every failure into an *Error with
// a Class and never retry on their own: agentry owns retries.
type Provider interface {
	// Name is the provider's prefix in model references ("anthropic", "openai", "demo").
	Name() string
	// Stream starts a call. Errors before the first event (bad credentials, rate limits) are
	// returned here or from the stream's first Next.
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Response is a whole reply, assembled from a stream by Collect.
type Response struct {
	Blocks     []Block
	Usage      Usage
	StopReason StopReason
}

// ToolCalls returns the tool_use blocks of r.
func (r Response) ToolCalls() []Block {
	var out []Block
	for _, b := range r.Blocks {
		if b.Type == BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// Collect reads s to its end, calling onEvent (if not nil) for each event, and assembles the
// reply. Tool call arguments are checked to be JSON (an empty argument string becomes {}).
// When the stream fails, the partial reply is returned with the error; Emitted on the error
// says whether any event had arrived.
func Collect(s Stream, onEvent func(Event)) (Response, error) {
	defer s.Close()
	var (
		resp    Response
		text    strings.Builder
		calls   []*Block
		args    []*strings.Builder
		byIndex = map[int]int{}
		emitted bool
	)
	flushText := func() {
		if text.Len() > 0 {
			resp.Blocks = append(resp.Blocks, Block{Type: BlockText, Text: text.String()})
			text.Reset()
		}
	}
	for s.Next() {
		ev := s.Event()
		emitted = true
		if onEvent != nil {
			onEvent(ev)
		}
		switch ev.Type {
		case EventTextDelta:
			text.WriteString(ev.Text)
		case EventToolCallStart:
			flushText()
			byIndex[ev.Index] = len(calls)
			calls = append(calls, &Block{Type: BlockToolUse, ID: ev.ToolCallID, Name: ev.ToolName})
			args = append(args, &strings.Builder{})
		case EventToolCallDelta:
			if i, ok := byIndex[ev.Index]; ok {
				args[i].WriteString(ev.ArgsDelta)
			}
		case EventUsage:
			resp.Usage = ev.Usage
		case EventDone:
			resp.StopReason = ev.StopReason
		}
	}
	flushText()
	for i, c := range calls {
		raw := strings.TrimSpace(args[i].String())
		if raw == "" {
			raw = "{}"
		}
		c.Input = json.RawMessage(raw)
		resp.Blocks = append(resp.Blocks, *c)
	}
	if err := s.Err(); err != nil {
		e := Classify(err)
		e.Emitted = emitted
		return resp, e
	}
	for _, c := range calls {
		if !json.Valid(c.Input) {
			return resp, &Error{Class: Recoverable, Message: fmt.Sprintf("tool call %s (%s) has arguments that are not valid JSON", c.ID, c.Name), Emitted: true}
		}
	}
	if resp.StopReason == "" {
		resp.StopReason = StopEndTurn
		if len(calls) > 0 {
			resp.StopReason = StopToolUse
		}
	}
	return resp, nil
}

// ParseModelRef splits "provider:model".
func ParseModelRef(ref string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(ref, ":")
	if !ok || provider == "" || model == "" {
		return "", "", fmt.Errorf("model %q: want provider:model, e.g. anthropic:claude-sonnet-4-5", ref)
	}
	return provider, model, nil
}
