package demo_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/demo"
)

func user(text string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: text}}}
}

func run(t *testing.T, p llm.Provider, req llm.Request) (llm.Response, []llm.Event) {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var events []llm.Event
	resp, err := llm.Collect(s, func(e llm.Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	return resp, events
}

var listFiles = llm.ToolSpec{Name: "list_files", Description: "List files.", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)}

func TestEchoIsLabelledAndDeterministic(t *testing.T) {
	p := demo.New()
	req := llm.Request{Model: "demo", Messages: []llm.Message{user("What is the capital of France?")}}
	a, events := run(t, p, req)
	b, _ := run(t, p, req)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("not deterministic:\n%+v\n%+v", a, b)
	}
	text := a.Blocks[0].Text
	if !strings.HasPrefix(text, demo.Label) || !strings.Contains(text, `"What is the capital of France?"`) || !strings.Contains(text, "not a real model") {
		t.Fatalf("reply = %q", text)
	}
	deltas := 0
	for _, e := range events {
		if e.Type == llm.EventTextDelta {
			deltas++
		}
	}
	if deltas < 10 {
		t.Fatalf("reply streamed in %d deltas, want word by word", deltas)
	}
	if a.StopReason != llm.StopEndTurn || a.Usage.InputTokens == 0 || a.Usage.OutputTokens != int64((len(text)+3)/4) {
		t.Fatalf("stop = %s, usage = %+v", a.StopReason, a.Usage)
	}
	if len(a.ToolCalls()) != 0 {
		t.Fatal("tool call without tools")
	}
}

func TestToolCallPath(t *testing.T) {
	p := demo.New()
	req := llm.Request{Model: "demo", Tools: []llm.ToolSpec{listFiles}, Messages: []llm.Message{user("Please list files in my project")}}
	first, _ := run(t, p, req)
	calls := first.ToolCalls()
	if len(calls) != 1 || calls[0].Name != "list_files" || string(calls[0].Input) != `{"path":"."}` || first.StopReason != llm.StopToolUse {
		t.Fatalf("first = %+v", first)
	}
	if !strings.HasPrefix(first.Blocks[0].Text, demo.Label) {
		t.Fatalf("text = %q", first.Blocks[0].Text)
	}
	again, _ := run(t, p, req)
	if again.ToolCalls()[0].ID != calls[0].ID {
		t.Fatal("tool call id is not deterministic")
	}

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Blocks: first.Blocks},
		llm.Message{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: calls[0].ID, Content: "main.go\nREADME.md"}}},
	)
	second, _ := run(t, p, req)
	text := second.Blocks[0].Text
	if len(second.ToolCalls()) != 0 || second.StopReason != llm.StopEndTurn {
		t.Fatalf("second = %+v (the tool must be called once)", second)
	}
	if !strings.HasPrefix(text, demo.Label) || !strings.Contains(text, "main.go\nREADME.md") || !strings.Contains(text, "list_files") {
		t.Fatalf("answer = %q", text)
	}

	// Without the tool on offer, no call.
	noTools, _ := run(t, p, llm.Request{Messages: []llm.Message{user("list files")}})
	if len(noTools.ToolCalls()) != 0 {
		t.Fatal("called a tool that was not offered")
	}
}

func TestCancel(t *testing.T) {
	p := &demo.Provider{WordDelay: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := p.Stream(ctx, llm.Request{Messages: []llm.Message{user("a long enough message to stream for a while")}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = llm.Collect(s, func(e llm.Event) { cancel() })
	var e *llm.Error
	if !errors.As(err, &e) || !errors.Is(err, context.Canceled) || !e.Emitted || e.Provider != "demo" {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("cancel took %s", d)
	}
	if _, err := p.Stream(ctx, llm.Request{}); err == nil {
		t.Fatal("Stream with a cancelled context succeeded")
	}
}
