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

func spec(name string) llm.ToolSpec {
	return llm.ToolSpec{Name: name, Parameters: []byte(`{"type":"object"}`)}
}

var workspaceTools = []llm.ToolSpec{spec("write_file"), spec("edit_file"), spec("read_file"), spec("delete_file"), listFiles}

// step sends req to p and, when the answer calls a tool, appends the call and result to req.
func step(t *testing.T, p llm.Provider, req *llm.Request, result string, isError bool) (llm.Response, error) {
	t.Helper()
	s, err := p.Stream(context.Background(), *req)
	if err != nil {
		return llm.Response{}, err
	}
	resp, err := llm.Collect(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls := resp.ToolCalls(); len(calls) == 1 {
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Blocks: resp.Blocks},
			llm.Message{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: calls[0].ID, Content: result, IsError: isError}}},
		)
	}
	return resp, nil
}

func TestCommandsRunInOrder(t *testing.T) {
	p := demo.New()
	req := llm.Request{Tools: workspaceTools, Messages: []llm.Message{user("write notes.md: hello\\nworld then edit notes.md: hello -> bye\nread notes.md then fail terminal")}}
	want := []struct{ tool, args string }{
		{"write_file", `{"content":"hello\nworld","path":"notes.md"}`},
		{"edit_file", `{"new_string":"bye","old_string":"hello","path":"notes.md"}`},
		{"read_file", `{"path":"notes.md"}`},
	}
	for _, w := range want {
		resp, err := step(t, p, &req, "ok", false)
		if err != nil {
			t.Fatal(err)
		}
		calls := resp.ToolCalls()
		if len(calls) != 1 || calls[0].Name != w.tool || string(calls[0].Input) != w.args || !strings.HasPrefix(resp.Blocks[0].Text, demo.Label) {
			t.Fatalf("want %s %s, got %+v", w.tool, w.args, resp)
		}
	}
	_, err := step(t, p, &req, "", false)
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.Terminal || e.Provider != "demo" || strings.Contains(err.Error(), "TERMINAL") {
		t.Fatalf("err = %v", err)
	}
}

func TestCommandDeclinedEndsTheCommands(t *testing.T) {
	p := demo.New()
	req := llm.Request{Tools: workspaceTools, Messages: []llm.Message{user("delete notes.md then read notes.md")}}
	if _, err := step(t, p, &req, "the user declined this call", true); err != nil {
		t.Fatal(err)
	}
	resp, err := step(t, p, &req, "", false)
	if err != nil || len(resp.ToolCalls()) != 0 || !strings.Contains(resp.Blocks[0].Text, "declined") {
		t.Fatalf("resp = %+v, %v", resp, err)
	}
}

func TestFailOnce(t *testing.T) {
	p := demo.New()
	req := llm.Request{Tools: workspaceTools, Messages: []llm.Message{user("fail transient once then list files")}}
	var e *llm.Error
	if _, err := step(t, p, &req, "", false); !errors.As(err, &e) || e.Class != llm.Transient {
		t.Fatalf("first attempt: %v", err)
	}
	resp, err := step(t, p, &req, "a.txt", false)
	if err != nil || len(resp.ToolCalls()) != 1 {
		t.Fatalf("the retry: %+v, %v", resp, err)
	}
	// Every command of "fail ... once" fails its first attempt, whoever asks.
	again := llm.Request{Tools: workspaceTools, Messages: []llm.Message{user("fail recoverable once")}}
	if _, err := step(t, p, &again, "", false); !errors.As(err, &e) || e.Class != llm.Recoverable {
		t.Fatalf("recoverable: %v", err)
	}
	if resp, err := step(t, p, &again, "", false); err != nil || !strings.Contains(resp.Blocks[0].Text, "Done") {
		t.Fatalf("recoverable retry: %+v, %v", resp, err)
	}
}

func TestHelpSlowSpawnAndEcho(t *testing.T) {
	p := demo.New()
	help, _ := run(t, p, llm.Request{Messages: []llm.Message{user("help")}})
	if !strings.Contains(help.Blocks[0].Text, demo.Commands) {
		t.Fatalf("help = %q", help.Blocks[0].Text)
	}
	// A slow answer is long (read its start only: it takes a while).
	s, err := p.Stream(context.Background(), llm.Request{Messages: []llm.Message{user("stream slowly")}})
	if err != nil {
		t.Fatal(err)
	}
	var start strings.Builder
	for i := 0; i < 4 && s.Next(); i++ {
		start.WriteString(s.Event().Text)
	}
	_ = s.Close()
	if start.String() != demo.Label+"Here is" {
		t.Fatalf("slow answer starts %q", start.String())
	}
	hook, _ := run(t, p, llm.Request{Tools: workspaceTools, Messages: []llm.Message{user("spawn a sub-agent: review the code")}})
	if len(hook.ToolCalls()) != 0 || !strings.Contains(hook.Blocks[0].Text, "review the code") {
		t.Fatalf("spawn without its tool = %+v", hook)
	}
	spawn, _ := run(t, p, llm.Request{Tools: append(workspaceTools, spec("spawn_subagent")), Messages: []llm.Message{user("spawn a sub-agent: review the code")}})
	if calls := spawn.ToolCalls(); len(calls) != 1 || calls[0].Name != "spawn_subagent" || !strings.Contains(string(calls[0].Input), "review the code") {
		t.Fatalf("spawn = %+v", spawn)
	}
	coder, _ := run(t, p, llm.Request{Tools: append(workspaceTools, spec("spawn_subagent")), Messages: []llm.Message{user("spawn a coder sub-agent with priority 2 with max tokens 5000: write a.md: x; read a.md")}})
	if calls := coder.ToolCalls(); len(calls) != 1 || string(calls[0].Input) != `{"goal":"write a.md: x\n read a.md","max_tokens":5000,"priority":2,"role":"CODER"}` {
		t.Fatalf("coder spawn = %+v", coder)
	}
	wait, _ := run(t, p, llm.Request{Tools: append(workspaceTools, spec("wait_subagents")), Messages: []llm.Message{user("wait for sub-agents")}})
	if calls := wait.ToolCalls(); len(calls) != 1 || calls[0].Name != "wait_subagents" || string(calls[0].Input) != `{}` {
		t.Fatalf("wait = %+v", wait)
	}
	waitFor, _ := run(t, p, llm.Request{Tools: append(workspaceTools, spec("wait_subagents")), Messages: []llm.Message{user("wait for sub-agents for 2 seconds")}})
	if calls := waitFor.ToolCalls(); len(calls) != 1 || string(calls[0].Input) != `{"timeout_seconds":2}` {
		t.Fatalf("wait for 2 seconds = %+v", waitFor.ToolCalls())
	}
	multi, _ := run(t, p, llm.Request{Tools: append(workspaceTools, spec("spawn_subagent")), Messages: []llm.Message{user("spawn 3 sub-agents with priorities 2,7: think for 5 ms; list files")}})
	if calls := multi.ToolCalls(); len(calls) != 3 || !strings.Contains(string(calls[1].Input), `"priority":7`) || !strings.Contains(string(calls[2].Input), `"priority":2`) ||
		calls[0].ID == calls[1].ID || !strings.Contains(string(calls[2].Input), `think for 5 ms\n list files`) {
		t.Fatalf("multi spawn = %+v", multi.ToolCalls())
	}
	echo, _ := run(t, p, llm.Request{Tools: workspaceTools, Messages: []llm.Message{user("Tell me a story")}})
	if !strings.Contains(echo.Blocks[0].Text, `"help"`) || !strings.Contains(echo.Blocks[0].Text, "write notes.md") {
		t.Fatalf("echo = %q", echo.Blocks[0].Text)
	}
	// Without tools a write is answered in words.
	off, _ := run(t, p, llm.Request{Messages: []llm.Message{user("write a.txt: x")}})
	if len(off.ToolCalls()) != 0 || !strings.Contains(off.Blocks[0].Text, "agentic: false") {
		t.Fatalf("tools off = %+v", off)
	}
}
