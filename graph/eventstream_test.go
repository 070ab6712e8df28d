package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentry/agentry/graph"
	"github.com/agentry/agentry/graph/generated"
	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/events"
)

// eventRenders reads agentry_subscription_event_renders_total{how} from the app's registry.
func eventRenders(t *testing.T, env *apptest.Env, how string) float64 {
	t.Helper()
	mfs, err := env.App.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "agentry_subscription_event_renders_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "how" && l.GetValue() == how {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestSubscriptionsShareEventRenderings: subscriptions asking for the same fields of an event
// get one rendering of it, made once; subscriptions asking for other fields (another alias of
// the root field or of a leaf, fragments, @include with other variables) get their own, each
// exactly what it asked for; a rendering with a field error is not shared.
func TestSubscriptionsShareEventRenderings(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	rdb := subRedis(t)
	conv := c.conversation(t, nil)
	plain := `subscription($c: ID!) { conversationEvents(conversationId: $c) { seq type data } }`
	rootAlias := `subscription($c: ID!) { x: conversationEvents(conversationId: $c) { seq type data } }`
	leafAlias := `subscription($c: ID!) { conversationEvents(conversationId: $c) { seq kind: type data } }`
	fancy := `subscription($c: ID!, $withData: Boolean!) {
	  ev: conversationEvents(conversationId: $c) { __typename kind: type data @include(if: $withData) ...more }
	}
	fragment more on RunEvent { runId phase }`
	timed := `subscription($c: ID!) { conversationEvents(conversationId: $c) { type timestamp } }`
	subs := []struct {
		query string
		vars  map[string]any
	}{
		{plain, map[string]any{"c": conv}},
		{plain, map[string]any{"c": conv}},
		{plain, map[string]any{"c": conv}},
		{rootAlias, map[string]any{"c": conv}},
		{leafAlias, map[string]any{"c": conv}},
		{fancy, map[string]any{"c": conv, "withData": false}},
		{fancy, map[string]any{"c": conv, "withData": true}},
		{timed, map[string]any{"c": conv}},
		{timed, map[string]any{"c": conv}},
	}
	const shapes = 6
	clients := make([]chan wsMessage, len(subs))
	for i, s := range subs {
		cl := wsConnect(t, c.Server.URL)
		cl.ack(c.s.AccessToken)
		cl.send("subscribe", "s", map[string]any{"query": s.query, "variables": s.vars})
		clients[i] = make(chan wsMessage, 64)
		go func() {
			defer close(clients[i])
			for {
				m, err := cl.tryRead(time.Minute)
				if err != nil {
					return
				}
				clients[i] <- m
			}
		}()
	}
	subWaitListening(t, rdb, c.Env, c.s.TenantID)
	tenant, convID, runID := subUUID(t, c.s.TenantID), subUUID(t, conv), uuid.New()
	pub := events.NewPublisher(c.App.Redis, c.App.Config.RedisPrefix, c.App.Log)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	next := func(k int, what string) wsMessage {
		t.Helper()
		select {
		case m := <-clients[k]:
			require.Equal(t, "next", m.Type, "client %d: %s", k, m.Payload)
			return m
		case <-ctx.Done():
			t.Fatalf("client %d: %s not received", k, what)
			return wsMessage{}
		}
	}
	// Subscriptions are not acknowledged: publish probes until every client has one, then a
	// fence, and drop everything up to each client's fence.
	ready := make([]bool, len(clients))
	for slices.Contains(ready, false) {
		require.NoError(t, ctx.Err(), "subscriptions not started")
		pub.Publish(ctx, tenant, events.Event{RunID: runID, TenantID: tenant, ConversationID: convID, Type: "probe", Data: []byte(`{}`), Timestamp: at})
		time.Sleep(20 * time.Millisecond)
		for i, ch := range clients {
			if len(ch) > 0 {
				ready[i] = true
			}
		}
	}
	pub.Publish(ctx, tenant, events.Event{RunID: runID, TenantID: tenant, ConversationID: convID, Type: "fence", Data: []byte(`{}`), Timestamp: at})
	for k := range clients {
		for !strings.Contains(string(next(k, "the fence").Payload), "fence") {
		}
	}

	rendered, shared := eventRenders(t, c.Env, "rendered"), eventRenders(t, c.Env, "shared")
	for i := range 3 {
		phase := ""
		if i == 2 {
			phase = "act"
		}
		pub.Publish(ctx, tenant, events.Event{RunID: runID, TenantID: tenant, ConversationID: convID, Type: events.MessageDelta,
			Phase: phase, Data: fmt.Appendf(nil, `{"text":"part %d"}`, i), Timestamp: at})
	}
	gid := subGlobalID("Run", runID)
	for i := range 3 {
		phase := "null"
		if i == 2 {
			phase = `"act"`
		}
		data := fmt.Sprintf(`{"text":"part %d"}`, i)
		plainWant := fmt.Sprintf(`{"data":{"conversationEvents":{"seq":0,"type":"message.delta","data":%s}}}`, data)
		want := []string{
			plainWant, plainWant, plainWant,
			fmt.Sprintf(`{"data":{"x":{"seq":0,"type":"message.delta","data":%s}}}`, data),
			fmt.Sprintf(`{"data":{"conversationEvents":{"seq":0,"kind":"message.delta","data":%s}}}`, data),
			fmt.Sprintf(`{"data":{"ev":{"__typename":"RunEvent","kind":"message.delta","runId":%q,"phase":%s}}}`, gid, phase),
			fmt.Sprintf(`{"data":{"ev":{"__typename":"RunEvent","kind":"message.delta","data":%s,"runId":%q,"phase":%s}}}`, data, gid, phase),
			`{"data":{"conversationEvents":{"type":"message.delta","timestamp":"2026-01-02T03:04:05Z"}}}`,
			`{"data":{"conversationEvents":{"type":"message.delta","timestamp":"2026-01-02T03:04:05Z"}}}`,
		}
		for k := range clients {
			m := next(k, fmt.Sprintf("event %d", i))
			require.JSONEq(t, want[k], string(m.Payload), "client %d, event %d", k, i)
			// In the order asked for, too.
			require.Equal(t, mustCompact(t, want[k]), mustCompact(t, string(m.Payload)), "client %d, event %d: field order", k, i)
		}
	}
	// One rendering per shape and event; the others of a shape share it.
	require.Equal(t, float64(3*shapes), eventRenders(t, c.Env, "rendered")-rendered, "events rendered by gqlgen")
	require.Equal(t, float64(3*(len(subs)-shapes)), eventRenders(t, c.Env, "shared")-shared, "events sent with another subscription's rendering")

	// An event whose rendering has a field error (a timestamp that is not a time, for a
	// non-null Time) is rendered, with its error, by every subscription that asks for it.
	pub.Publish(ctx, tenant, events.Event{RunID: runID, TenantID: tenant, ConversationID: convID, Type: events.MessageDelta, Data: []byte(`{}`)})
	for _, k := range []int{7, 8} {
		var p struct {
			Errors []struct{ Message string }
		}
		m := next(k, "the event without a time")
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		require.NotEmpty(t, p.Errors, "client %d: %s", k, m.Payload)
	}
}

func mustCompact(t *testing.T, s string) string {
	t.Helper()
	var v json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestRunEventLeavesAreTheSchemas: the fields a shared rendering may contain are RunEvent's
// fields, every one a scalar without arguments (what a subscription renders of an event then
// depends only on which of them it selects). A field added to RunEvent fails this test until
// it is listed, or, if it has arguments or fields of its own, until the shape covers them.
func TestRunEventLeavesAreTheSchemas(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	def := schema.Types["RunEvent"]
	require.NotNil(t, def)
	var names []string
	for _, f := range def.Fields {
		names = append(names, f.Name)
		require.Empty(t, f.Arguments, "RunEvent.%s has arguments", f.Name)
		kind := schema.Types[f.Type.Name()].Kind
		require.Contains(t, []ast.DefinitionKind{ast.Scalar, ast.Enum}, kind, "RunEvent.%s is not a leaf", f.Name)
	}
	require.ElementsMatch(t, append(names, "__typename"), graph.RunEventLeaves())
}
