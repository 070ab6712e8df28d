package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// wsMsg is a graphql-transport-ws message.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dialWS opens a graphql-transport-ws socket and sends connection_init with token. It returns
// the socket and the server's first answer: connection_ack, or the close error refusing it.
func dialWS(t *testing.T, ctx context.Context, baseURL, token string) (*websocket.Conn, error) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/graphql"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	require.NoError(t, wsjson.Write(ctx, c, wsMsg{Type: "connection_init", Payload: json.RawMessage(fmt.Sprintf(`{"authorization":"Bearer %s"}`, token))}))
	var ack wsMsg
	if err := wsjson.Read(ctx, c, &ack); err != nil {
		return c, err
	}
	require.Equal(t, "connection_ack", ack.Type)
	return c, nil
}

func subscribeMsg(id, query string, vars map[string]any) wsMsg {
	p, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return wsMsg{ID: id, Type: "subscribe", Payload: p}
}

const runEventsQuery = `subscription($id: ID!) { runEvents(runId: $id) { seq type } }`

// queuedRun is a run with a stored event (task.queued) that no worker takes: each runEvents
// subscription to it answers that event at once.
func queuedRun(t *testing.T, e *apptest.Env, s apptest.Session) string {
	t.Helper()
	var conv struct{ CreateConversation struct{ ID string } }
	e.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "t"}) { id } }`, nil).Decode(t, &conv)
	var sent struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	e.Do(t, s.AccessToken, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, content: "hi"}) { run { id } } }`,
		map[string]any{"c": conv.CreateConversation.ID}).Decode(t, &sent)
	return sent.SendMessage.Run.ID
}

func errorCode(t *testing.T, payload json.RawMessage) string {
	t.Helper()
	var errs []struct {
		Extensions map[string]any `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(payload, &errs), "%s", payload)
	require.NotEmpty(t, errs)
	code, _ := errs[0].Extensions["code"].(string)
	return code
}

// The attack: one socket starts 2,000 subscriptions. The first 100 (the default cap) run, each
// answering the run's stored event; every other is refused with an error message
// (RATE_LIMITED) before any resolver runs, and the socket stays usable: once one subscription
// is completed, another may start.
func TestSocketSubscriptionCap(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true})
	s := e.SignUp(t, "", "")
	runID := queuedRun(t, e, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := dialWS(t, ctx, e.Server.URL, s.AccessToken)
	require.NoError(t, err)

	const attempts, limit = 2000, 100
	go func() {
		for i := range attempts {
			if wsjson.Write(ctx, c, subscribeMsg(fmt.Sprint(i), runEventsQuery, map[string]any{"id": runID})) != nil {
				return
			}
		}
	}()
	running, refused := map[string]bool{}, 0
	for len(running)+refused < attempts {
		var m wsMsg
		require.NoError(t, wsjson.Read(ctx, c, &m), "after %d running and %d refused", len(running), refused)
		switch m.Type {
		case "next":
			require.False(t, running[m.ID], "one stored event per subscription")
			running[m.ID] = true
		case "error":
			require.Equal(t, "RATE_LIMITED", errorCode(t, m.Payload), "%s", m.Payload)
			refused++
		default:
			t.Fatalf("unexpected %s message: %s", m.Type, m.Payload)
		}
	}
	require.Equal(t, limit, len(running), "subscriptions running")
	require.Equal(t, attempts-limit, refused)

	// Completing one frees its place.
	var done string
	for id := range running {
		done = id
		break
	}
	require.NoError(t, wsjson.Write(ctx, c, wsMsg{ID: done, Type: "complete"}))
	for {
		var m wsMsg
		require.NoError(t, wsjson.Read(ctx, c, &m))
		if m.Type == "complete" && m.ID == done {
			break
		}
	}
	require.NoError(t, wsjson.Write(ctx, c, subscribeMsg("again", runEventsQuery, map[string]any{"id": runID})))
	var m wsMsg
	require.NoError(t, wsjson.Read(ctx, c, &m))
	require.Equal(t, wsMsg{ID: "again", Type: "next"}, wsMsg{ID: m.ID, Type: m.Type}, "%s", m.Payload)
}

// The attack: one user opens 200 sockets. The first 20 (the default cap) are acknowledged;
// every other is closed with 4429 before it is; another user is not affected, and a socket
// closed gives its place back.
func TestSocketsPerUserCap(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true})
	s := e.SignUp(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const attempts, limit = 200, 20
	var open []*websocket.Conn
	for i := range attempts {
		c, err := dialWS(t, ctx, e.Server.URL, s.AccessToken)
		if i < limit {
			require.NoError(t, err, "socket %d", i)
			open = append(open, c)
			continue
		}
		require.Equal(t, websocket.StatusCode(4429), websocket.CloseStatus(err), "socket %d: %v", i, err)
		_ = c.CloseNow()
	}

	other := e.SignUp(t, "", "")
	_, err := dialWS(t, ctx, e.Server.URL, other.AccessToken)
	require.NoError(t, err, "another user's socket")

	require.NoError(t, open[0].Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool {
		c, err := dialWS(t, ctx, e.Server.URL, s.AccessToken)
		if err != nil {
			_ = c.CloseNow()
			return false
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "a closed socket's place is given back")
}

// graphql-transport-ws: a subscribe under the id of an operation in flight closes the socket
// with 4409; an id whose operation completed may be used again.
func TestSocketDuplicateIDCloses4409(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true})
	s := e.SignUp(t, "", "")
	runID := queuedRun(t, e, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dialWS(t, ctx, e.Server.URL, s.AccessToken)
	require.NoError(t, err)
	vars := map[string]any{"id": runID}

	next := func(id string) {
		t.Helper()
		var m wsMsg
		require.NoError(t, wsjson.Read(ctx, c, &m))
		require.Equal(t, wsMsg{ID: id, Type: "next"}, wsMsg{ID: m.ID, Type: m.Type}, "%s", m.Payload)
	}
	require.NoError(t, wsjson.Write(ctx, c, subscribeMsg("a", runEventsQuery, vars)))
	next("a")
	require.NoError(t, wsjson.Write(ctx, c, wsMsg{ID: "a", Type: "complete"}))
	var m wsMsg
	require.NoError(t, wsjson.Read(ctx, c, &m))
	require.Equal(t, wsMsg{ID: "a", Type: "complete"}, wsMsg{ID: m.ID, Type: m.Type})
	require.NoError(t, wsjson.Write(ctx, c, subscribeMsg("a", runEventsQuery, vars)))
	next("a")

	require.NoError(t, wsjson.Write(ctx, c, subscribeMsg("a", runEventsQuery, vars)))
	err = wsjson.Read(ctx, c, &m)
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce), "socket closed: %v (message %+v)", err, m)
	require.Equal(t, websocket.StatusCode(4409), ce.Code)
	require.Equal(t, "Subscriber for a already exists", ce.Reason)
}

// The attack: 300 createConversation at once. The default limit (burst 20, then 2 a second per
// user) lets about 20 through; every refusal is RATE_LIMITED with retryAfter, and exactly the
// conversations answered are stored. Each other creating mutation draws on the same limit.
func TestCreatingMutationsAreRateLimited(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_RATE_LIMIT_CREATE": ""}})
	s := e.SignUp(t, "", "")

	const attempts = 300
	start := time.Now()
	var (
		mu      sync.Mutex
		created []string
		wg      sync.WaitGroup
	)
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attempts / 30 {
				res := e.Do(t, s.AccessToken, `mutation($t: String) { createConversation(input: {title: $t}) { id } }`,
					map[string]any{"t": fmt.Sprintf("c%d-%d", w, i)})
				if len(res.Errors) > 0 {
					if !(res.Code() == "RATE_LIMITED" && res.Errors[0].Extensions["retryAfter"] != nil) {
						t.Errorf("refusal: %s", res.Body)
					}
					continue
				}
				var out struct{ CreateConversation struct{ ID string } }
				res.Decode(t, &out)
				mu.Lock()
				created = append(created, out.CreateConversation.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.GreaterOrEqual(t, len(created), 20, "the burst")
	require.LessOrEqual(t, len(created), 20+int(2*elapsed.Seconds())+1, "burst 20, then 2 a second, over %s", elapsed)

	var list struct {
		Conversations struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	e.Do(t, s.AccessToken, `{ conversations(first: 100) { edges { node { id } } } }`, nil).Decode(t, &list)
	var stored []string
	for _, edge := range list.Conversations.Edges {
		stored = append(stored, edge.Node.ID)
	}
	require.ElementsMatch(t, created, stored, "what was answered is what is stored")

}

// Each creating mutation draws on the creating limit of its user: with one allowed an hour,
// a second call is refused.
func TestEveryCreatingMutationIsRateLimited(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_RATE_LIMIT_CREATE": "1/h burst 1"}})
	for name, op := range map[string]string{
		"createConversation": `mutation($n: String!) { createConversation(input: {title: $n}) { id } }`,
		"createApiKey":       `mutation($n: String!) { createApiKey(input: {name: $n, role: MEMBER}) { secret } }`,
		"addMember":          `mutation($n: String!) { addMember(input: {email: $n, role: MEMBER}) { role } }`,
		"createTask":         `mutation($n: String!) { createTask(input: {title: $n}) { id } }`,
		"createSnapshot":     `mutation($n: String!) { createSnapshot(label: $n) { id } }`,
		// Sends an email: limited as creating mutations are.
		"requestEmailVerification": `mutation { requestEmailVerification }`,
	} {
		s := e.SignUp(t, "", "")
		res := e.Do(t, s.AccessToken, op, map[string]any{"n": "first@example.com"})
		require.Empty(t, res.Errors, "%s: %s", name, res.Body)
		res = e.Do(t, s.AccessToken, op, map[string]any{"n": "second@example.com"})
		require.Equal(t, "RATE_LIMITED", res.Code(), "%s: %s", name, res.Body)
	}
}
