package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// gqlClient posts GraphQL operations to one server over keep-alive connections.
type gqlClient struct {
	url string
	hc  *http.Client
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     time.Minute,
	}, Timeout: 60 * time.Second}
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// do posts query with vars as token's user and decodes data into out.
func (c *gqlClient) do(ctx context.Context, token, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	return c.post(ctx, token, body, out)
}

// post sends a prepared request body.
func (c *gqlClient) post(ctx context.Context, token string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("HTTP %d: %.200s", res.StatusCode, raw)
	}
	if len(env.Errors) > 0 {
		return fmt.Errorf("graphql: %s (%v)", env.Errors[0].Message, env.Errors[0].Extensions["code"])
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", res.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Data, out)
}

// session is a signed-up user with their tenant.
type session struct {
	token    string
	tenantID uuid.UUID
	userID   uuid.UUID
}

func (c *gqlClient) signUp(ctx context.Context, email string) (session, error) {
	var out struct {
		SignUp struct {
			AccessToken string
			Viewer      struct {
				User   struct{ ID string }
				Tenant struct{ ID string }
			}
		}
	}
	err := c.do(ctx, "", `mutation($in: SignUpInput!) { signUp(input: $in) { accessToken viewer { user { id } tenant { id } } } }`,
		map[string]any{"in": map[string]any{"email": email, "password": "bench password of some length", "tenantName": "Bench " + email}}, &out)
	if err != nil {
		return session{}, fmt.Errorf("sign up %s: %w", email, err)
	}
	s := session{token: out.SignUp.AccessToken}
	if s.userID, err = decodeID(out.SignUp.Viewer.User.ID); err != nil {
		return s, err
	}
	s.tenantID, err = decodeID(out.SignUp.Viewer.Tenant.ID)
	return s, err
}

// createConversation starts a conversation without tools on model ("openai:bench-...").
func (c *gqlClient) createConversation(ctx context.Context, s session, model string) (string, error) {
	var out struct{ CreateConversation struct{ ID string } }
	err := c.do(ctx, s.token, `mutation($in: CreateConversationInput!) { createConversation(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"model": model, "agentic": false, "title": "bench"}}, &out)
	return out.CreateConversation.ID, err
}

// setBudget gives the session's tenant a monthly budget far above anything the bench spends:
// every model call then reserves and settles, as under a real budget.
func (c *gqlClient) setBudget(ctx context.Context, s session) error {
	return c.do(ctx, s.token, `mutation($in: SetBudgetInput!) { setBudget(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"scope": "TENANT", "period": "MONTH", "tokenLimit": int64(1e15), "costLimitMicros": int64(1e15)}}, nil)
}

const sendMessageQuery = `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`

// sendMessage sends content to a conversation and returns the run's global id.
func (c *gqlClient) sendMessage(ctx context.Context, s session, conv, content string) (string, error) {
	var out struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	err := c.do(ctx, s.token, sendMessageQuery, map[string]any{"in": map[string]any{"conversationId": conv, "content": content}}, &out)
	return out.SendMessage.Run.ID, err
}

// decodeID returns the uuid of a global id (base64url of "Type:uuid").
func decodeID(id string) (uuid.UUID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("global id %q: %w", id, err)
	}
	_, u, ok := strings.Cut(string(raw), ":")
	if !ok {
		return uuid.Nil, fmt.Errorf("global id %q: no type", id)
	}
	return uuid.Parse(u)
}

// wsEvent is one RunEvent received over a subscription.
type wsEvent struct {
	Seq   int             `json:"seq"`
	RunID string          `json:"runId"`
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data"`
	// At is when the client read the message.
	At time.Time `json:"-"`
}

// wsConn is one graphql-transport-ws socket carrying any number of subscriptions; every event
// goes to onEvent (called from the socket's reader goroutine, so it must be quick).
type wsConn struct {
	conn    *websocket.Conn
	onEvent func(subID string, ev wsEvent)
	// onRaw, when set, sees every message first; when it reports true the message is not
	// decoded (FANOUT's subscribers only read a number out of it). raw is the reader's buffer:
	// it is valid during the call only.
	onRaw  func(raw []byte, at time.Time) bool
	mu     sync.Mutex
	nextID int
	done   chan struct{}
	err    error
}

const runEventFields = `{ seq runId type data }`

// dialWS opens a socket to baseURL's /graphql and authenticates with token.
func dialWS(ctx context.Context, baseURL, token string, onEvent func(string, wsEvent)) (*wsConn, error) {
	return dialWSRaw(ctx, baseURL, token, onEvent, nil)
}

// dialWSRaw is dialWS with a raw message hook (see wsConn.onRaw).
func dialWSRaw(ctx context.Context, baseURL, token string, onEvent func(string, wsEvent), onRaw func([]byte, time.Time) bool) (*wsConn, error) {
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/graphql"
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: newHTTPClient(1)})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	conn.SetReadLimit(16 << 20)
	w := &wsConn{conn: conn, onEvent: onEvent, onRaw: onRaw, done: make(chan struct{})}
	if err := w.write(dctx, map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}}); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	_, raw, err := conn.Read(dctx)
	if err != nil {
		_ = conn.CloseNow()
		return nil, fmt.Errorf("connection_ack: %w", err)
	}
	var ack struct{ Type string }
	if json.Unmarshal(raw, &ack) != nil || ack.Type != "connection_ack" {
		_ = conn.CloseNow()
		return nil, fmt.Errorf("expected connection_ack, got %.200s", raw)
	}
	go w.read()
	return w, nil
}

func (w *wsConn) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn.Write(ctx, websocket.MessageText, b)
}

// subscribe starts a subscription and returns its id. Events may flow as soon as the server has
// subscribed (which the protocol does not acknowledge).
func (w *wsConn) subscribe(ctx context.Context, query string, vars map[string]any) (string, error) {
	w.mu.Lock()
	w.nextID++
	id := fmt.Sprint(w.nextID)
	w.mu.Unlock()
	return id, w.write(ctx, map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
}

func (w *wsConn) subscribeConversation(ctx context.Context, convID string) (string, error) {
	return w.subscribe(ctx, `subscription($id: ID!) { conversationEvents(conversationId: $id) `+runEventFields+` }`, map[string]any{"id": convID})
}

func (w *wsConn) subscribeRun(ctx context.Context, runID string, after int) (string, error) {
	return w.subscribe(ctx, `subscription($id: ID!, $after: Int) { runEvents(runId: $id, afterSeq: $after) `+runEventFields+` }`, map[string]any{"id": runID, "after": after})
}

type wsMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Payload struct {
		Data struct {
			Conv *wsEvent `json:"conversationEvents"`
			Run  *wsEvent `json:"runEvents"`
		} `json:"data"`
		Errors json.RawMessage `json:"errors"`
	} `json:"payload"`
}

// read reads the socket's messages into one buffer, reused (the harness runs in the process it
// measures: a new buffer per message would add its garbage to agentry's collections).
func (w *wsConn) read() {
	defer close(w.done)
	ctx := context.Background()
	var buf bytes.Buffer
	for {
		_, r, err := w.conn.Reader(ctx)
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			w.err = err
			return
		}
		raw := buf.Bytes()
		at := time.Now()
		if w.onRaw != nil && w.onRaw(raw, at) {
			continue
		}
		var m wsMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			w.err = fmt.Errorf("bad message %.200s: %w", raw, err)
			return
		}
		switch m.Type {
		case "next":
			ev := m.Payload.Data.Conv
			if ev == nil {
				ev = m.Payload.Data.Run
			}
			if ev != nil {
				ev.At = at
				w.onEvent(m.ID, *ev)
			}
		case "ping":
			_ = w.write(ctx, map[string]any{"type": "pong"})
		}
	}
}

// close ends the socket.
func (w *wsConn) close() {
	_ = w.conn.Close(websocket.StatusNormalClosure, "")
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
		_ = w.conn.CloseNow()
	}
}
