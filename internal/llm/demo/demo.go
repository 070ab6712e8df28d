// Package demo is an offline, deterministic llm.Provider so that agentry runs with no model key
// (`make run`) and every feature can be tried without one. Every reply starts with
// "[demo model] " so nobody mistakes it for a real model. It understands a few plain-language
// commands (Commands; "help" lists them): write, edit, read, delete and list files through the
// workspace tools (so approvals, writes and rollback questions happen), fail a call with a given
// failure class (retries, failed runs), stream slowly (pause, stop, cancel), and spawn a
// sub-agent once that tool exists. Anything else is echoed with a word on what it can do.
// Replies stream word by word; usage is estimated at ~4 characters a token.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry/agentry/internal/llm"
)

// Name is the provider's prefix in model references; Model its only model ("demo:demo").
const (
	Name  = "demo"
	Model = "demo"
)

// Label starts every reply.
const Label = "[demo model] "

// ListFilesTool is the tool the demo calls when asked to list files.
const ListFilesTool = "list_files"

// SlowWordDelay paces a reply asked to "stream slowly".
const SlowWordDelay = 250 * time.Millisecond

// Provider is the demo model. The zero value is ready to use.
type Provider struct {
	// WordDelay paces the stream (0: no pause), to make streaming visible in a UI.
	WordDelay time.Duration
	// failedOnce holds the "fail ... once" commands that have failed (by failKey) until their
	// retry passes them.
	failedOnce sync.Map
}

var _ llm.Provider = (*Provider)(nil)

// New returns a demo Provider without pacing.
func New() *Provider { return &Provider{} }

// Name implements llm.Provider.
func (p *Provider) Name() string { return Name }

// Models implements llm.ModelLister: the demo has one model, so "demo:anything-else" is refused.
func (p *Provider) Models() []string { return []string{Model} }

// Stream implements llm.Provider. It never touches the network; it fails when ctx is done and
// when a "fail" command asks it to (before streaming anything).
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	a := respond(req, p.passOnce)
	if a.fail != nil {
		return nil, a.fail
	}
	delay := p.WordDelay
	if a.slow {
		delay = max(delay, SlowWordDelay)
	}
	return &stream{ctx: ctx, delay: delay, think: a.think, events: a.events(req), stop: make(chan struct{})}, nil
}

// passOnce reports whether the "fail ... once" command of key has failed already (it passes
// now, and would fail again for a conversation that asks again); otherwise it records the
// failure about to happen.
func (p *Provider) passOnce(key string) bool {
	if _, failed := p.failedOnce.LoadAndDelete(key); failed {
		return true
	}
	p.failedOnce.Store(key, true)
	return false
}

// answer is what the demo does with a request: stream text and maybe call a tool, or fail.
type answer struct {
	text string
	call *llm.Block
	// more are further tool calls of the same reply (a spawn of several sub-agents).
	more []llm.Block
	slow bool // stream at SlowWordDelay
	// think is a pause before the reply's first event ("think for N ms").
	think time.Duration
	fail  *llm.Error // fail the call instead
}

// events are the stream of a, with usage estimated for req.
func (a answer) events(req llm.Request) []llm.Event {
	var (
		events []llm.Event
		out    = len(a.text)
	)
	for _, w := range splitWords(a.text) {
		events = append(events, llm.Event{Type: llm.EventTextDelta, Text: w})
	}
	stop := llm.StopEndTurn
	if a.call != nil {
		events = append(events,
			llm.Event{Type: llm.EventToolCallStart, Index: 1, ToolCallID: a.call.ID, ToolName: a.call.Name},
			llm.Event{Type: llm.EventToolCallDelta, Index: 1, ArgsDelta: string(a.call.Input)},
		)
		out += len(a.call.Name) + len(a.call.Input)
		stop = llm.StopToolUse
		for i, c := range a.more {
			events = append(events,
				llm.Event{Type: llm.EventToolCallStart, Index: 2 + i, ToolCallID: c.ID, ToolName: c.Name},
				llm.Event{Type: llm.EventToolCallDelta, Index: 2 + i, ArgsDelta: string(c.Input)},
			)
			out += len(c.Name) + len(c.Input)
		}
	}
	return append(events,
		llm.Event{Type: llm.EventUsage, Usage: llm.Usage{InputTokens: inputTokens(req), OutputTokens: tokens(out)}},
		llm.Event{Type: llm.EventDone, StopReason: stop},
	)
}

// respond decides the answer to req: the commands of the user's last message, step by step
// (one tool call per model call), or, for a message without commands, the echo (or the list of
// files it asks for). passOnce decides "fail ... once" commands (see Provider.passOnce).
func respond(req llm.Request, passOnce func(key string) bool) answer {
	u := lastUserText(req.Messages)
	if u >= 0 {
		if cmds, ok := parseCommands(userText(req.Messages[u])); ok {
			return runCommands(req, u, cmds, passOnce)
		}
	}
	var last llm.Message
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1]
	}
	// Answer a tool result.
	if a, ok := toolResultAnswer(req, last); ok {
		return a
	}

	said := userText(last)
	if last.Role == llm.RoleUser && wantsFiles(said) {
		if spec, ok := offered(req.Tools, ListFilesTool); ok {
			call := &llm.Block{Type: llm.BlockToolUse, ID: callID(req), Name: ListFilesTool, Input: listArgs(spec)}
			return answer{text: Label + "Let me list the files of the workspace.", call: call}
		}
	}

	var b strings.Builder
	b.WriteString(Label)
	words := strings.Fields(said)
	switch len(words) {
	case 0:
		b.WriteString("You sent no text.")
	default:
		shown := words
		if len(shown) > 30 {
			shown = shown[:30]
		}
		quote := strings.Join(shown, " ")
		if len(shown) < len(words) {
			quote += " …"
		}
		fmt.Fprintf(&b, "You said (%d word%s): \"%s\"", len(words), plural(len(words)), quote)
	}
	b.WriteString(" This is an offline demo reply, not a real model: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) to talk to one.")
	if _, ok := offered(req.Tools, ListFilesTool); ok {
		b.WriteString(` I can also show what agentry does: say "help" for my commands, such as "write notes.md: hello" (a write that asks for your approval), "read notes.md", "list files", "fail transient" (a retry) or "stream slowly" (time to pause, stop or cancel).`)
	} else {
		b.WriteString(` Say "help" for what I can do (this conversation has its tools off, so only "fail" and "stream slowly" work here).`)
	}
	return answer{text: b.String()}
}

// toolResultAnswer answers the tool result in last, if it holds one.
func toolResultAnswer(req llm.Request, last llm.Message) (answer, bool) {
	for _, b := range last.Blocks {
		if b.Type != llm.BlockToolResult {
			continue
		}
		name := toolName(req.Messages, b.ToolUseID)
		if b.IsError {
			return answer{text: Label + fmt.Sprintf("The %s tool failed: %s", name, excerpt(b.Content, 400))}, true
		}
		content := strings.TrimSpace(b.Content)
		if content == "" {
			return answer{text: Label + fmt.Sprintf("The %s tool returned nothing: the workspace looks empty.", name)}, true
		}
		lines := strings.Count(content, "\n") + 1
		return answer{text: Label + fmt.Sprintf("The %s tool returned %d line(s):\n%s\nThat is what I found. (An offline demo reply, not a real model.)", name, lines, excerpt(content, 1500))}, true
	}
	return answer{}, false
}

func wantsFiles(s string) bool {
	s = strings.ToLower(s)
	for _, p := range []string{"list files", "list the files", "list my files", "list all files", "list_files", "show files", "show me the files", "what files"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func offered(tools []llm.ToolSpec, name string) (llm.ToolSpec, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return llm.ToolSpec{}, false
}

// listArgs gives list_files a path "." when its schema has a path parameter.
func listArgs(spec llm.ToolSpec) json.RawMessage {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(spec.Parameters, &schema) == nil {
		if _, ok := schema.Properties["path"]; ok {
			return json.RawMessage(`{"path":"."}`)
		}
	}
	return json.RawMessage(`{}`)
}

// callID derives the tool call id from the conversation, so the same request gives the same id.
func callID(req llm.Request) string {
	h := fnv.New32a()
	for _, m := range req.Messages {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Role, m.Text())
	}
	return fmt.Sprintf("toolu_demo_%08x_%d", h.Sum32(), len(req.Messages))
}

func toolName(msgs []llm.Message, id string) string {
	for _, m := range msgs {
		for _, b := range m.Blocks {
			if b.Type == llm.BlockToolUse && b.ID == id {
				return b.Name
			}
		}
	}
	return "tool"
}

func excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + " …"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// splitWords splits s into deltas at word starts, spaces going with the following word.
func splitWords(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if (s[i] == ' ' || s[i] == '\n') && s[i-1] != ' ' && s[i-1] != '\n' {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// inputTokens estimates the request at ~4 characters a token, images 1000.
func inputTokens(req llm.Request) int64 {
	chars := len(req.System)
	var images int64
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			chars += len(b.Text) + len(b.Content) + len(b.Name) + len(b.Input)
			if b.Type == llm.BlockImage {
				images++
			}
		}
	}
	for _, t := range req.Tools {
		chars += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return tokens(chars) + 1000*images
}

func tokens(chars int) int64 { return int64((chars + 3) / 4) }

type stream struct {
	ctx    context.Context
	delay  time.Duration
	think  time.Duration // before the first event
	events []llm.Event
	pos    int
	cur    llm.Event
	err    error
	closed atomic.Bool
	stop   chan struct{} // closed by Close
}

func (s *stream) Next() bool {
	if s.closed.Load() || s.err != nil || s.pos >= len(s.events) {
		return false
	}
	if d := s.delay; (d > 0 && s.pos > 0 && s.events[s.pos].Type == llm.EventTextDelta) || (s.pos == 0 && s.think > 0) {
		if s.pos == 0 {
			d = s.think
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
		case <-s.stop:
			t.Stop()
			return false
		}
	}
	if err := s.ctx.Err(); err != nil {
		s.err = ctxError(err)
		return false
	}
	s.cur = s.events[s.pos]
	s.pos++
	return true
}

func (s *stream) Event() llm.Event { return s.cur }

func (s *stream) Err() error {
	if s.err == nil {
		return nil
	}
	return s.err
}

// Close ends the stream; it may be called from another goroutine to abort a blocked Next.
func (s *stream) Close() error {
	if !s.closed.Swap(true) {
		close(s.stop)
	}
	return nil
}

func ctxError(err error) *llm.Error {
	e := *llm.Classify(err)
	e.Provider = Name
	return &e
}
