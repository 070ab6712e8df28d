package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

const tailUsage = `usage: agentry tail --run RUN_ID [--after SEQ] [--url http://127.0.0.1:8080] [--token TOKEN] [--json] [--queued-hint 10s]

Streams a run's events over the GraphQL WebSocket (graphql-transport-ws): the stored ones after
--after, then live ones until the run ends (Ctrl-C stops watching). The token comes from --token
or AGENTRY_TOKEN. When the run waits for an approval it prints the approval's id and the
mutation that answers it; when it stays QUEUED for --queued-hint, it asks whether a worker runs.
`

// tailEvent is what tail reads of each event.
type tailEvent struct {
	Seq  int             `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// tail is a small graphql-transport-ws client for watching a run from a terminal.
func tail(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runID := fs.String("run", "", "run id")
	after := fs.Int("after", 0, "replay events after this seq")
	base := fs.String("url", "", "agentry base URL")
	token := fs.String("token", getenv("AGENTRY_TOKEN"), "access token or API key")
	asJSON := fs.Bool("json", false, "print each event as one JSON line")
	queuedHint := fs.Duration("queued-hint", 10*time.Second, "how long a QUEUED run waits before the hint that no worker may be running")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = io.WriteString(stdout, tailUsage)
		return nil
	}
	if err != nil || *runID == "" || *token == "" {
		return errors.New(strings.TrimSpace(tailUsage))
	}
	if *base == "" {
		addr := getenv("AGENTRY_HTTP_ADDR")
		if addr == "" {
			addr = "127.0.0.1:8080"
		}
		*base = "http://" + addr
	}
	err = tailRun(ctx, *base, *token, *runID, *after, *asJSON, *queuedHint, stdout)
	if ctx.Err() != nil {
		return nil // interrupted (Ctrl-C): the watcher stops, the run goes on
	}
	return err
}

func tailRun(ctx context.Context, base, token, runID string, after int, asJSON bool, queuedHint time.Duration, stdout io.Writer) error {
	wsURL := strings.Replace(strings.TrimRight(base, "/"), "http", "ws", 1) + "/graphql"
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dialCtx, wsURL, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{}})
	if err != nil {
		return fmt.Errorf("connect to %s: %w", wsURL, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	if err := wsjson.Write(ctx, conn, map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}}); err != nil {
		return err
	}
	var ack struct{ Type string }
	if err := wsjson.Read(dialCtx, conn, &ack); err != nil || ack.Type != "connection_ack" {
		return fmt.Errorf("not acknowledged (%s): %v", ack.Type, err)
	}
	query := `subscription($run: ID!, $after: Int) { runEvents(runId: $run, afterSeq: $after) { seq type phase data timestamp } }`
	if err := wsjson.Write(ctx, conn, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": query, "variables": map[string]any{"run": runID, "after": after},
	}}); err != nil {
		return err
	}

	type message struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	msgs := make(chan message)
	readErr := make(chan error, 1)
	go func() {
		for {
			var m message
			if err := wsjson.Read(ctx, conn, &m); err != nil {
				readErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	p := &tailPrinter{w: stdout, json: asJSON}
	defer p.endLine()
	queued := time.NewTimer(queuedHint) // a run still QUEUED by then gets the hint
	defer queued.Stop()
	for {
		var msg message
		select {
		case msg = <-msgs:
		case err := <-readErr:
			return fmt.Errorf("read: %w", err)
		case <-queued.C:
			if p.queued {
				p.hint(fmt.Sprintf("the run is still QUEUED after %s: is a worker running? Start one with `agentry worker` (or `make worker`), or use `agentry dev`.", queuedHint))
			}
			continue
		}
		switch msg.Type {
		case "ping":
			_ = wsjson.Write(ctx, conn, map[string]any{"type": "pong"})
		case "error":
			return fmt.Errorf("subscription refused: %s", msg.Payload)
		case "complete":
			p.endLine()
			return conn.Close(websocket.StatusNormalClosure, "")
		case "next":
			var pl struct {
				Data struct {
					RunEvents tailEvent `json:"runEvents"`
				} `json:"data"`
				Errors json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(msg.Payload, &pl); err != nil {
				return err
			}
			if len(pl.Errors) > 0 && string(pl.Errors) != "null" {
				return fmt.Errorf("subscription error: %s", pl.Errors)
			}
			if p.print(pl.Data.RunEvents) {
				queued.Reset(queuedHint) // the wait for a worker starts now
			}
		}
	}
}

// tailPrinter writes a run's events to a terminal: token deltas as running text, the others one
// a line, and hints on what the run waits for.
type tailPrinter struct {
	w      io.Writer
	json   bool
	inText bool // a line of deltas is open
	queued bool // the last status event left the run QUEUED
}

// print writes ev; it reports whether the run has just become QUEUED (queued, or resumed).
func (p *tailPrinter) print(ev tailEvent) (queued bool) {
	switch ev.Type {
	case "task.queued", "execution.resumed":
		p.queued, queued = true, true
	case "execution.started", "execution.paused", "execution.waiting", "execution.completed", "execution.failed", "execution.cancelled", "execution.timed_out", "approval.requested":
		p.queued = false
	}
	if p.json {
		line, _ := json.Marshal(ev)
		fmt.Fprintln(p.w, string(line))
	} else if ev.Type == "message.delta" || ev.Type == "message.snapshot" {
		// A snapshot is the text a reply had streamed when tail joined; deltas continue it.
		var d struct{ Text string }
		_ = json.Unmarshal(ev.Data, &d)
		fmt.Fprint(p.w, d.Text)
		p.inText = true
	} else {
		p.endLine()
		fmt.Fprintf(p.w, "[%d] %s %s\n", ev.Seq, ev.Type, ev.Data)
	}
	if ev.Type == "execution.waiting" {
		p.hint("the run waits for its sub-agents (no worker held); it goes on when they end or the wait times out. See run { subagents { status } }.")
	}
	if ev.Type == "approval.requested" {
		var d struct{ ApprovalID, Kind, Question string }
		_ = json.Unmarshal(ev.Data, &d)
		if d.Kind == "rollback" {
			p.hint(fmt.Sprintf("the run asks what to do with its changes (approval %s). Answer with:\n  mutation { resolveRollback(approvalId: %q, choice: ROLLBACK) { status } }   (or KEEP, CONTINUE)", d.ApprovalID, d.ApprovalID))
		} else {
			p.hint(fmt.Sprintf("the run waits for approval %s. Answer with:\n  mutation { resolveApproval(id: %q, decision: APPROVE) { status } }   (or REJECT)", d.ApprovalID, d.ApprovalID))
		}
	}
	return queued
}

func (p *tailPrinter) hint(s string) {
	if p.json {
		return
	}
	p.endLine()
	fmt.Fprintln(p.w, "hint: "+s)
}

func (p *tailPrinter) endLine() {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
}
