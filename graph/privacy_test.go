package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// privTarget is a conversation of alice's with one run parked on an approval of a tool call.
type privTarget struct {
	conv, run, approval, toolCall, message string
}

// privPark makes a conversation for token's user (shared with the team when shared), sends a
// message and, with no worker running, parks its run on an approval of a write_file call, as
// the executor does.
func privPark(t *testing.T, env *apptest.Env, token, tenant string, shared bool) privTarget {
	t.Helper()
	var conv struct{ CreateConversation struct{ ID string } }
	env.Do(t, token, `mutation { createConversation(input: {title: "secret plans"}) { id } }`, nil).Decode(t, &conv)
	out := privTarget{conv: conv.CreateConversation.ID}
	if shared {
		var set struct {
			SetConversationVisibility struct{ Visibility string }
		}
		env.Do(t, token, `mutation($c: ID!) { setConversationVisibility(id: $c, visibility: TENANT) { visibility } }`,
			map[string]any{"c": out.conv}).Decode(t, &set)
		require.Equal(t, "TENANT", set.SetConversationVisibility.Visibility)
	}
	var sent struct {
		SendMessage struct {
			Run     struct{ ID string }
			Message struct{ ID string }
		}
	}
	env.Do(t, token, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, content: "my secret"}) { run { id } message { id } } }`,
		map[string]any{"c": out.conv}).Decode(t, &sent)
	out.run, out.message = sent.SendMessage.Run.ID, sent.SendMessage.Message.ID

	ctx := context.Background()
	tenantID, rid := approvalUUID(t, "Tenant", tenant), approvalUUID(t, "Run", out.run)
	var r dbsqlc.Run
	require.NoError(t, env.App.DB.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		r, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: rid})
		return err
	}))
	require.NotNil(t, r.JobID)
	l, err := env.App.Runs.Acquire(ctx, tenantID, rid, "test-worker", *r.JobID)
	require.NoError(t, err)
	var a dbsqlc.Approval
	var c dbsqlc.ToolCall
	require.NoError(t, env.App.Runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
		c, err = tx.Q.ToolCallInsert(ctx, dbsqlc.ToolCallInsertParams{
			TenantID: tenantID, ID: uuid.Must(uuid.NewV7()), RunID: rid, MessageID: uuid.New(), CallID: "call_1", Turn: 1,
			Name: "write_file", Arguments: []byte(`{"path":"notes/secret.md","content":"the secret"}`), Status: "PENDING", Risk: 40,
		})
		if err != nil {
			return err
		}
		a, err = env.App.Approvals.Request(ctx, tx, l, approval.Request{Kind: approval.KindToolCall, ToolCall: &c, Question: "Allow write_file?"})
		return err
	}))
	out.approval = base64.RawURLEncoding.EncodeToString([]byte("Approval:" + a.ID.String()))
	out.toolCall = base64.RawURLEncoding.EncodeToString([]byte("ToolCall:" + c.ID.String()))
	return out
}

// privOutcome classifies an answer: OK, an error code, NULL (a null node or field without an
// error), EMPTY (a list without items), ABSENT (a list without the target).
func privOutcome(res *apptest.Response, ok func(data json.RawMessage) string) string {
	if len(res.Errors) > 0 {
		return res.Code()
	}
	if res.Status == http.StatusUnauthorized {
		return "UNAUTHENTICATED"
	}
	return ok(res.Data)
}

// privWS subscribes over graphql-transport-ws; trigger (when not nil) runs once the
// subscription is started, so a live-only subscription has something to deliver. The outcome
// is OK (an event), or the error's code (UNAUTHENTICATED when the socket is refused).
func privWS(t *testing.T, env *apptest.Env, token, query string, vars map[string]any, trigger func()) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(env.Server.URL, "http") + "/graphql"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	defer conn.CloseNow()
	require.NoError(t, wsjson.Write(ctx, conn, map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}}))
	var msg struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := wsjson.Read(ctx, conn, &msg); err != nil || msg.Type != "connection_ack" {
		return "UNAUTHENTICATED"
	}
	require.NoError(t, wsjson.Write(ctx, conn, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}))
	if trigger != nil {
		// The server registers the subscription after it reads the message, and a live-only
		// subscription misses what came before: poke until something arrives.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				trigger()
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	for {
		msg.Payload = nil
		if err := wsjson.Read(ctx, conn, &msg); err != nil {
			return "CLOSED: " + err.Error()
		}
		switch msg.Type {
		case "ping":
			_ = wsjson.Write(ctx, conn, map[string]any{"type": "pong"})
		case "error":
			var errs []apptest.GQLError
			_ = json.Unmarshal(msg.Payload, &errs)
			return (&apptest.Response{Errors: errs}).Code()
		case "next":
			var res apptest.Response
			require.NoError(t, json.Unmarshal(msg.Payload, &res))
			return privOutcome(&res, func(json.RawMessage) string { return "OK" })
		case "complete":
			return "COMPLETE"
		}
	}
}

// privSSE subscribes over GraphQL over SSE and classifies the first event like privWS.
func privSSE(t *testing.T, env *apptest.Env, token, query string, vars map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	if res.StatusCode == http.StatusUnauthorized {
		return "UNAUTHENTICATED"
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(data) != "" {
			var out apptest.Response
			require.NoError(t, json.Unmarshal([]byte(data), &out), "%s", data)
			return privOutcome(&out, func(json.RawMessage) string { return "OK" })
		}
	}
	return "CLOSED"
}

// TestPrivateConversations performs, through the public API, every query, mutation and
// subscription that reaches a conversation, run, event, approval, tool call or message, as
// another MEMBER, a VIEWER, an ADMIN and a removed member, on a MEMBER's private conversation
// and on one she shared with the team. A private conversation is NOT_FOUND (null from node,
// absent from lists) to everyone but its owner; an admin sees its run's record (status, cost)
// but not its content; a shared one is read by everyone and written by MEMBER and above, while
// only the run's user or an admin controls its run and decides its approval.
func TestPrivateConversations(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "Acme")
	join := func(role string) sessAuthPayload {
		return memJoin(t, env, owner.AccessToken, env.SignUp(t, "", ""), owner.TenantID, role)
	}
	alice, bob, vera, adam, rex := join("MEMBER"), join("MEMBER"), join("VIEWER"), join("ADMIN"), join("MEMBER")
	private := privPark(t, env, alice.AccessToken, owner.TenantID, false)
	shared := privPark(t, env, alice.AccessToken, owner.TenantID, true)
	res := env.Do(t, owner.AccessToken, memRemove, map[string]any{"u": rex.Viewer.User.ID})
	require.Empty(t, res.Errors, "%s", res.Body)

	has := func(id string) func(json.RawMessage) string {
		return func(d json.RawMessage) string {
			if bytes.Contains(d, []byte(id)) {
				return "OK"
			}
			return "ABSENT"
		}
	}
	// nonEmpty follows objects of one field down: null is NULL, an empty list EMPTY.
	var nonEmpty func(d json.RawMessage) string
	nonEmpty = func(d json.RawMessage) string {
		d = bytes.TrimSpace(d)
		switch {
		case string(d) == "null":
			return "NULL"
		case string(d) == "[]":
			return "EMPTY"
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(d, &m) == nil && len(m) == 1 {
			for _, v := range m {
				return nonEmpty(v)
			}
		}
		return "OK"
	}
	type op struct {
		name string
		do   func(token string, tg privTarget) string
		// want per mode; a mode not listed expects the op's default (def).
		def  string
		want map[string]string
	}
	q := func(query string, vars func(privTarget) map[string]any, ok func(privTarget) func(json.RawMessage) string) func(string, privTarget) string {
		return func(token string, tg privTarget) string {
			return privOutcome(env.Do(t, token, query, vars(tg)), ok(tg))
		}
	}
	conv := func(tg privTarget) map[string]any { return map[string]any{"id": tg.conv} }
	runv := func(tg privTarget) map[string]any { return map[string]any{"id": tg.run} }
	plain := func(privTarget) func(json.RawMessage) string { return nonEmpty }
	// Modes: hidden (another member, a viewer, on a private conversation), adminPrivate,
	// memberShared, viewerShared, adminShared, removed.
	const hidden, viewerHidden, adminPrivate, memberShared, viewerShared, adminShared, removed = "hidden", "viewerHidden", "adminPrivate", "memberShared", "viewerShared", "adminShared", "removed"
	// A VIEWER is refused every write for their role before anything is looked up (FORBIDDEN
	// whatever the id); what they read of a private conversation is as for another member.
	writes := map[string]bool{"sendMessage": true, "sendMessage INTERRUPT": true, "updateConversation": true, "setConversationVisibility": true,
		"deleteConversation": true, "resolveApproval": true, "resolveRollback": true, "cancelRun": true, "pauseRun": true, "stopRun": true, "resumeRun": true}
	readable := map[string]string{memberShared: "OK", viewerShared: "OK", adminShared: "OK", removed: "DENIED"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	ops := []op{
		{"conversation", q(`query($id: ID!) { conversation(id: $id) { id title } }`, conv, plain), "NOT_FOUND", readable},
		{"conversation.messages", q(`query($id: ID!) { conversation(id: $id) { messages(last: 5) { edges { node { content } } } } }`, conv, plain), "NOT_FOUND", readable},
		{"conversation.runs", q(`query($id: ID!) { conversation(id: $id) { runs { edges { node { id } } } } }`, conv, plain), "NOT_FOUND", readable},
		{"conversations", q(`{ conversations(first: 100) { edges { node { id } } } }`, nil2, func(tg privTarget) func(json.RawMessage) string { return has(tg.conv) }), "ABSENT", readable},
		{"node(Conversation)", q(`query($id: ID!) { node(id: $id) { id } }`, conv, plain), "NULL", readable},
		{"node(Message)", q(`query($id: ID!) { node(id: $id) { id ... on Message { content } } }`, func(tg privTarget) map[string]any { return map[string]any{"id": tg.message} }, plain), "NULL", readable},
		{"run", q(`query($id: ID!) { run(id: $id) { id status costMicros } }`, runv, plain), "NOT_FOUND", with(readable, adminPrivate, "OK")},
		{"run.conversation", q(`query($id: ID!) { run(id: $id) { conversation { id } } }`, runv, plain), "NOT_FOUND", readable}, // an admin sees the run, not its private conversation
		{"run.events", q(`query($id: ID!) { run(id: $id) { events { seq type data } } }`, runv, plain), "NOT_FOUND", with(readable, adminPrivate, "EMPTY")},
		{"run.toolCalls", q(`query($id: ID!) { run(id: $id) { toolCalls { name arguments } } }`, runv, plain), "NOT_FOUND", with(readable, adminPrivate, "EMPTY")},
		{"run.approvals", q(`query($id: ID!) { run(id: $id) { approvals { id question } } }`, runv, plain), "NOT_FOUND", with(readable, adminPrivate, "EMPTY")},
		{"runs", q(`{ runs(first: 100) { edges { node { id } } } }`, nil2, func(tg privTarget) func(json.RawMessage) string { return has(tg.run) }), "ABSENT",
			// runs lists a member's own runs; an admin's lists every run's record.
			with(readable, adminPrivate, "OK", memberShared, "ABSENT", viewerShared, "ABSENT")},
		{"node(Run)", q(`query($id: ID!) { node(id: $id) { id } }`, runv, plain), "NULL", with(readable, adminPrivate, "OK")},
		{"node(ToolCall)", q(`query($id: ID!) { node(id: $id) { id ... on ToolCall { arguments } } }`, func(tg privTarget) map[string]any { return map[string]any{"id": tg.toolCall} }, plain), "NULL", readable},
		{"node(Approval)", q(`query($id: ID!) { node(id: $id) { id } }`, func(tg privTarget) map[string]any { return map[string]any{"id": tg.approval} }, plain), "NULL", readable},
		{"approvals", q(`{ approvals(status: PENDING, first: 100) { edges { node { id } } } }`, nil2, func(tg privTarget) func(json.RawMessage) string { return has(tg.approval) }), "ABSENT",
			// the inbox is one's own runs' approvals; an admin's every approval they may see.
			with(readable, memberShared, "ABSENT", viewerShared, "ABSENT")},
		{"sendMessage", q(`mutation($id: ID!) { sendMessage(input: {conversationId: $id, content: "hi"}) { run { id } } }`, conv, plain), "NOT_FOUND",
			map[string]string{memberShared: "OK", viewerShared: "FORBIDDEN", adminShared: "OK", removed: "DENIED"}},
		{"sendMessage INTERRUPT", q(`mutation($id: ID!) { sendMessage(input: {conversationId: $id, content: "stop that", ifBusy: INTERRUPT}) { run { id } } }`, conv, plain), "NOT_FOUND",
			// interrupting cancels alice's run: only she (or an admin of a shared conversation) may.
			map[string]string{memberShared: "FORBIDDEN", viewerShared: "FORBIDDEN", adminShared: "SKIP", removed: "DENIED"}},
		{"updateConversation", q(`mutation($id: ID!) { updateConversation(id: $id, input: {title: "mine now"}) { id } }`, conv, plain), "NOT_FOUND",
			map[string]string{memberShared: "FORBIDDEN", viewerShared: "FORBIDDEN", adminShared: "OK", removed: "DENIED"}},
		{"setConversationVisibility", q(`mutation($id: ID!) { setConversationVisibility(id: $id, visibility: TENANT) { id } }`, conv, plain), "NOT_FOUND",
			map[string]string{memberShared: "FORBIDDEN", viewerShared: "FORBIDDEN", adminShared: "FORBIDDEN", removed: "DENIED"}},
		{"deleteConversation", q(`mutation($id: ID!) { deleteConversation(id: $id) }`, conv, plain), "NOT_FOUND",
			// an admin may delete a shared conversation, but not while its run waits
			map[string]string{memberShared: "FORBIDDEN", viewerShared: "FORBIDDEN", adminShared: "CONFLICT", removed: "DENIED"}},
		{"resolveApproval", q(`mutation($id: ID!) { resolveApproval(id: $id, decision: APPROVE) { id } }`, func(tg privTarget) map[string]any { return map[string]any{"id": tg.approval} }, plain), "NOT_FOUND",
			map[string]string{memberShared: "FORBIDDEN", viewerShared: "FORBIDDEN", adminShared: "SKIP", removed: "DENIED"}},
		{"resolveRollback", q(`mutation($id: ID!) { resolveRollback(approvalId: $id, choice: ROLLBACK) { id } }`, func(tg privTarget) map[string]any { return map[string]any{"id": tg.approval} }, plain), "NOT_FOUND",
			// a tool-call approval is not a rollback question: those who see it are told so
			map[string]string{memberShared: "BAD_USER_INPUT", viewerShared: "FORBIDDEN", adminShared: "BAD_USER_INPUT", removed: "DENIED"}},
	}
	for _, verb := range []string{"cancelRun", "pauseRun", "stopRun", "resumeRun"} {
		ops = append(ops, op{verb, q(`mutation($id: ID!) { `+verb+`(id: $id) { id } }`, runv, plain), "NOT_FOUND",
			map[string]string{adminPrivate: "FORBIDDEN", memberShared: "FORBIDDEN", viewerShared: "FORBIDDEN", adminShared: "SKIP", removed: "DENIED"}})
	}
	const runEventsQ = `subscription($id: ID!) { runEvents(runId: $id) { seq type } }`
	const convEventsQ = `subscription($id: ID!) { conversationEvents(conversationId: $id) { seq type } }`
	// A live-only subscription gets an event when alice sends a message into the conversation.
	poke := func(tg privTarget) func() {
		return func() {
			res := env.Do(t, alice.AccessToken, `mutation($id: ID!) { sendMessage(input: {conversationId: $id, content: "poke"}) { run { id } } }`, conv(tg))
			if len(res.Errors) > 0 {
				t.Errorf("poke: %s", res.Body)
			}
		}
	}
	subs := with(readable, removed, "DENIED")
	ops = append(ops,
		op{"runEvents (WebSocket)", func(token string, tg privTarget) string { return privWS(t, env, token, runEventsQ, runv(tg), nil) }, "NOT_FOUND", subs},
		op{"runEvents (SSE)", func(token string, tg privTarget) string { return privSSE(t, env, token, runEventsQ, runv(tg)) }, "NOT_FOUND", subs},
		op{"conversationEvents (WebSocket)", func(token string, tg privTarget) string {
			return privWS(t, env, token, convEventsQ, conv(tg), poke(tg))
		}, "NOT_FOUND", subs},
		op{"conversationEvents (SSE)", func(token string, tg privTarget) string { return privSSE(t, env, token, convEventsQ, conv(tg)) }, "NOT_FOUND",
			// SSE answers only once an event comes: only the refusals are immediate
			with(subs, memberShared, "SKIP", viewerShared, "SKIP", adminShared, "SKIP")},
	)

	actors := []struct {
		name, token         string
		onPrivate, onShared string
	}{
		{"another MEMBER", bob.AccessToken, hidden, memberShared},
		{"a VIEWER", vera.AccessToken, viewerHidden, viewerShared},
		{"an ADMIN", adam.AccessToken, adminPrivate, adminShared},
		{"a removed member", rex.AccessToken, removed, removed},
	}
	for _, o := range ops {
		for _, a := range actors {
			for _, c := range []struct {
				name, mode string
				tg         privTarget
			}{{"private", a.onPrivate, private}, {"shared", a.onShared, shared}} {
				want, ok := o.want[c.mode]
				if !ok {
					want = o.def
				}
				if c.mode == viewerHidden && writes[o.name] {
					want = "FORBIDDEN"
				}
				if want == "SKIP" {
					continue
				}
				got := o.do(a.token, c.tg)
				if want == "DENIED" && got != "OK" && got != "" {
					continue // a removed member's credentials may fail as a whole or see nothing
				}
				if want != got {
					t.Logf("%s", env.Do(t, alice.AccessToken, `query($id: ID!) { conversation(id: $id) { visibility title } }`, conv(c.tg)).Body)
				}
				require.Equal(t, want, got, "%s as %s on a %s conversation", o.name, a.name, c.name)
			}
		}
		// Sanity: the owner gets every read on both, so the refusals above are privacy, not breakage.
		if !writes[o.name] && o.name != "conversationEvents (SSE)" {
			for _, tg := range []privTarget{private, shared} {
				require.Equal(t, "OK", o.do(alice.AccessToken, tg), "%s as the owner", o.name)
			}
		}
	}

	// The controls the others were refused work for the run's user, and for an admin on a
	// shared conversation.
	require.Equal(t, "OK", privOutcome(env.Do(t, adam.AccessToken, `mutation($id: ID!) { resolveApproval(id: $id, decision: REJECT) { id } }`,
		map[string]any{"id": shared.approval}), nonEmpty), "an admin decides a shared conversation's approval")
	require.Equal(t, "OK", privOutcome(env.Do(t, alice.AccessToken, `mutation($id: ID!) { resolveApproval(id: $id, decision: REJECT) { id } }`,
		map[string]any{"id": private.approval}), nonEmpty))
	require.Equal(t, "OK", privOutcome(env.Do(t, alice.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { id } }`, runv(private)), nonEmpty))
	require.Equal(t, "OK", privOutcome(env.Do(t, adam.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { id } }`, runv(shared)), nonEmpty))

	// Making the shared conversation private again hides it from the others at once.
	res = env.Do(t, alice.AccessToken, `mutation($id: ID!) { setConversationVisibility(id: $id, visibility: PRIVATE) { visibility viewerIsOwner } }`, conv(shared))
	require.JSONEq(t, `{"setConversationVisibility": {"visibility": "PRIVATE", "viewerIsOwner": true}}`, string(res.Data), "%s", res.Body)
	require.Equal(t, "NOT_FOUND", env.Do(t, bob.AccessToken, `query($id: ID!) { conversation(id: $id) { id } }`, conv(shared)).Code())
	require.Equal(t, "NOT_FOUND", env.Do(t, bob.AccessToken, `mutation($id: ID!) { setConversationVisibility(id: $id, visibility: TENANT) { id } }`, conv(shared)).Code())
}

func nil2(privTarget) map[string]any { return nil }
