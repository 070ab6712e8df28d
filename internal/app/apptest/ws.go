package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"
)

// Subscription is one graphql-transport-ws subscription on its own socket.
type Subscription struct {
	t    testing.TB
	conn *websocket.Conn
	// Done is set once the server sent complete (or error).
	Done bool
	// Err holds the payload of an error message.
	Err json.RawMessage
}

// Event is a runEvents / conversationEvents payload.
type Event struct {
	Seq   int             `json:"seq"`
	RunID string          `json:"runId"`
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data"`
}

// Subscribe opens a socket to baseURL (an agentry server), authenticates with token and starts
// the subscription query. The socket is closed when t ends.
func Subscribe(t testing.TB, baseURL, token, query string, vars map[string]any) *Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/graphql"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	conn.SetReadLimit(16 << 20)
	t.Cleanup(func() { _ = conn.CloseNow() })
	require.NoError(t, wsjson.Write(ctx, conn, map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}}))
	var ack struct{ Type string }
	require.NoError(t, wsjson.Read(ctx, conn, &ack))
	require.Equal(t, "connection_ack", ack.Type)
	require.NoError(t, wsjson.Write(ctx, conn, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}))
	return &Subscription{t: t, conn: conn}
}

// SubscribeRun subscribes to runEvents(runId, afterSeq).
func (e *Env) SubscribeRun(t testing.TB, token, runID string, afterSeq int) *Subscription {
	return Subscribe(t, e.Server.URL, token,
		`subscription($id: ID!, $after: Int) { runEvents(runId: $id, afterSeq: $after) { seq runId type data } }`,
		map[string]any{"id": runID, "after": afterSeq})
}

// Next returns the next event, or ok false when the subscription completed (or failed). It
// fails t when nothing arrives within timeout.
func (s *Subscription) Next(timeout time.Duration) (Event, bool) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if s.Done {
			return Event{}, false
		}
		var msg struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		err := wsjson.Read(ctx, s.conn, &msg)
		require.NoError(s.t, err, "reading the subscription")
		switch msg.Type {
		case "ping":
			_ = wsjson.Write(ctx, s.conn, map[string]any{"type": "pong"})
		case "complete":
			s.Done = true
		case "error":
			s.Done, s.Err = true, msg.Payload
		case "next":
			var p struct {
				Data   map[string]Event `json:"data"`
				Errors json.RawMessage  `json:"errors"`
			}
			require.NoError(s.t, json.Unmarshal(msg.Payload, &p))
			if len(p.Errors) > 0 && string(p.Errors) != "null" {
				s.Done, s.Err = true, p.Errors
				return Event{}, false
			}
			for _, ev := range p.Data {
				return ev, true
			}
		}
	}
}

// Collect reads events until the subscription completes (or stop returns true for an event).
func (s *Subscription) Collect(timeout time.Duration, stop func(Event) bool) []Event {
	s.t.Helper()
	var out []Event
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			s.t.Fatalf("subscription did not finish within %s; got %d events", timeout, len(out))
		}
		ev, ok := s.Next(left)
		if !ok {
			return out
		}
		out = append(out, ev)
		if stop != nil && stop(ev) {
			return out
		}
	}
}

// Close closes the socket.
func (s *Subscription) Close() { _ = s.conn.Close(websocket.StatusNormalClosure, "") }

// Durable returns the events with a seq, in order, and checks they are 1..n after after with no
// gap or duplicate.
func Durable(t testing.TB, evs []Event, after int) []Event {
	t.Helper()
	var out []Event
	for _, e := range evs {
		if e.Seq == 0 {
			continue
		}
		require.Equal(t, after+len(out)+1, e.Seq, "seq gap or duplicate: %s", fmt.Sprint(seqs(evs)))
		out = append(out, e)
	}
	return out
}

func seqs(evs []Event) []int {
	out := make([]int, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// WaitEnd reads the subscription until the server ends it (complete, error, or the socket
// closed) and reports whether that happened within timeout.
func (s *Subscription) WaitEnd(timeout time.Duration) bool {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !s.Done {
		var msg struct {
			Type string `json:"type"`
		}
		if err := wsjson.Read(ctx, s.conn, &msg); err != nil {
			if ctx.Err() != nil {
				return false
			}
			s.Done = true // the server closed the socket
			break
		}
		switch msg.Type {
		case "ping":
			_ = wsjson.Write(ctx, s.conn, map[string]any{"type": "pong"})
		case "complete", "error":
			s.Done = true
		}
	}
	return true
}
