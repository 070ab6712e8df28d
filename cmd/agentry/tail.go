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

const tailUsage = `usage: agentry tail --run RUN_ID [--after SEQ] [--url http://127.0.0.1:8080] [--token TOKEN] [--json]

Streams a run's events over the GraphQL WebSocket (graphql-transport-ws): the stored ones after
--after, then live ones until the run ends. The token comes from --token or AGENTRY_TOKEN.
`

// tail is a small graphql-transport-ws client for watching a run from a terminal.
func tail(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runID := fs.String("run", "", "run id")
	after := fs.Int("after", 0, "replay events after this seq")
	base := fs.String("url", "", "agentry base URL")
	token := fs.String("token", getenv("AGENTRY_TOKEN"), "access token or API key")
	asJSON := fs.Bool("json", false, "print each event as one JSON line")
	if err := fs.Parse(args); err != nil || *runID == "" || *token == "" {
		return errors.New(tailUsage)
	}
	if *base == "" {
		addr := getenv("AGENTRY_HTTP_ADDR")
		if addr == "" {
			addr = "127.0.0.1:8080"
		}
		*base = "http://" + addr
	}
	wsURL := strings.Replace(strings.TrimRight(*base, "/"), "http", "ws", 1) + "/graphql"
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dialCtx, wsURL, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{}})
	if err != nil {
		return fmt.Errorf("connect to %s: %w", wsURL, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	if err := wsjson.Write(ctx, conn, map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + *token}}); err != nil {
		return err
	}
	var ack struct{ Type string }
	if err := wsjson.Read(dialCtx, conn, &ack); err != nil || ack.Type != "connection_ack" {
		return fmt.Errorf("not acknowledged (%s): %v", ack.Type, err)
	}
	query := `subscription($run: ID!, $after: Int) { runEvents(runId: $run, afterSeq: $after) { seq type phase data timestamp } }`
	if err := wsjson.Write(ctx, conn, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": query, "variables": map[string]any{"run": *runID, "after": *after},
	}}); err != nil {
		return err
	}
	inText := false
	for {
		var msg struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := wsjson.Read(ctx, conn, &msg); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		switch msg.Type {
		case "ping":
			_ = wsjson.Write(ctx, conn, map[string]any{"type": "pong"})
		case "error":
			return fmt.Errorf("subscription refused: %s", msg.Payload)
		case "complete":
			if inText {
				fmt.Fprintln(stdout)
			}
			return conn.Close(websocket.StatusNormalClosure, "")
		case "next":
			var p struct {
				Data struct {
					RunEvents struct {
						Seq  int             `json:"seq"`
						Type string          `json:"type"`
						Data json.RawMessage `json:"data"`
					} `json:"runEvents"`
				} `json:"data"`
				Errors json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(msg.Payload, &p); err != nil {
				return err
			}
			if len(p.Errors) > 0 && string(p.Errors) != "null" {
				return fmt.Errorf("subscription error: %s", p.Errors)
			}
			ev := p.Data.RunEvents
			if *asJSON {
				line, _ := json.Marshal(ev)
				fmt.Fprintln(stdout, string(line))
				continue
			}
			if ev.Type == "message.delta" {
				var d struct{ Text string }
				_ = json.Unmarshal(ev.Data, &d)
				fmt.Fprint(stdout, d.Text)
				inText = true
				continue
			}
			if inText {
				fmt.Fprintln(stdout)
				inText = false
			}
			fmt.Fprintf(stdout, "[%d] %s %s\n", ev.Seq, ev.Type, ev.Data)
		}
	}
}
