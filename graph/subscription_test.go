package graph_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// Subscriptions end to end: runEvents resumption (afterSeq), reconnect churn, a dropped Redis
// connection, conversationEvents, and tenant isolation of every event path.

// subRedisURL is the Redis the tests share (the one apptest.Start uses).
func subRedisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// subRedis is a plain client of the test Redis, for inspecting and disturbing it.
func subRedis(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(subRedisURL())
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// subUUID returns the uuid inside a server-made global id ("Type:uuid", base64url).
func subUUID(t testing.TB, id string) uuid.UUID {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err, "global id %q", id)
	_, u, ok := strings.Cut(string(raw), ":")
	require.True(t, ok, "global id %q", raw)
	return uuid.MustParse(u)
}

// subGlobalID builds a global id the way the server does.
func subGlobalID(typ string, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + id.String()))
}

// subWaitListening waits until Redis has a subscriber on the tenant's event channel in env's
// namespace: a subscription opened before is then attached, and no live event can miss it.
func subWaitListening(t testing.TB, rdb *redis.Client, env *apptest.Env, tenantGlobalID string) {
	t.Helper()
	ch := events.Channel(env.App.Config.RedisPrefix, subUUID(t, tenantGlobalID))
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(context.Background(), ch).Result()
		return err == nil && n[ch] > 0
	}, 10*time.Second, 5*time.Millisecond, "nobody subscribed to %s", ch)
}

// subSubscribeConversation opens a conversationEvents subscription.
func subSubscribeConversation(t testing.TB, env *apptest.Env, token, convID string) *apptest.Subscription {
	return apptest.Subscribe(t, env.Server.URL, token,
		`subscription($id: ID!) { conversationEvents(conversationId: $id) { seq runId type data } }`,
		map[string]any{"id": convID})
}

// subChatEnv is newChatEnv (Anthropic) with extra configuration.
func subChatEnv(t *testing.T, extra map[string]string) *chatEnv {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t)
	env := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL()}
	for k, v := range extra {
		env[k] = v
	}
	e := apptest.Start(t, apptest.Options{Env: env})
	return &chatEnv{Env: e, llm: srv, model: "anthropic:claude-sonnet-4-5", s: e.SignUp(t, "", "")}
}

// subToolTurns makes the model call list_files turns times, each reply after delay, then answer
// with a final text: a run with many durable events spread over time (each tool turn adds
// message.completed, usage.recorded, tool.started and tool.completed). list_files is read-only,
// so no call waits for an approval under the default settings (write_file would).
func subToolTurns(c *chatEnv, turns int, delay time.Duration, gate <-chan struct{}) {
	var mu sync.Mutex
	n := 0
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		if gate != nil {
			<-gate
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		if i > turns {
			return llmtest.Stream(llmtest.Delay(delay), llmtest.Text("I have looked at every file."))
		}
		return llmtest.Stream(llmtest.Delay(delay), llmtest.Text(fmt.Sprintf("Looking at the files, step %d.", i)),
			llmtest.ToolCall(fmt.Sprintf("call_%d", i), "list_files", `{}`))
	})
}

// subSameLog checks that got are exactly the stored events want (seqs and types, in order).
func subSameLog(t testing.TB, want, got []apptest.Event, what string) {
	t.Helper()
	require.Equal(t, subSeqTypes(want), subSeqTypes(got), "%s", what)
}

func subSeqTypes(evs []apptest.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = strconv.Itoa(e.Seq) + ":" + e.Type
	}
	return out
}

// subErrInfo is the part of an error a client can see and compare.
type subErrInfo struct{ Code, Message string }

// subNotFound checks that a GraphQL answer is one NOT_FOUND error.
func subNotFound(t testing.TB, res *apptest.Response, what string) subErrInfo {
	t.Helper()
	require.Len(t, res.Errors, 1, "%s: %s", what, res.Body)
	require.Equal(t, "NOT_FOUND", res.Code(), "%s: %s", what, res.Body)
	return subErrInfo{res.Code(), res.Errors[0].Message}
}

// subCount counts the events of type typ.
func subCount(evs []apptest.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// subErr checks that a subscription ended with one NOT_FOUND error.
func subErr(t testing.TB, s *apptest.Subscription, what string) subErrInfo {
	t.Helper()
	require.True(t, s.Done, "%s: the subscription is still open", what)
	require.NotEmpty(t, s.Err, "%s: the subscription completed without an error", what)
	var errs []apptest.GQLError
	require.NoError(t, json.Unmarshal(s.Err, &errs), "%s: %s", what, s.Err)
	require.Len(t, errs, 1, "%s: %s", what, s.Err)
	code, _ := errs[0].Extensions["code"].(string)
	require.Equal(t, "NOT_FOUND", code, "%s: %s", what, s.Err)
	return subErrInfo{code, errs[0].Message}
}

// TestRunEventsResumeAfterCompletion: resubscribing to a finished run with afterSeq = k gives
// exactly the stored events k+1..N (as run.events reports them) and completes; with k = N it
// completes at once with nothing.
func TestRunEventsResumeAfterCompletion(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	subToolTurns(c, 2, 0, nil)
	s, _ := c.send(t, c.conversation(t, nil), "look twice", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	all, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	n := len(all)
	require.Equal(t, all, apptest.Durable(t, all, 0), "run.events is not 1..N")
	require.Greater(t, n, 10)
	require.Equal(t, "execution.completed", all[n-1].Type, "the terminal event must be the run's last")

	for _, k := range []int{0, 1, 2, n / 2, n - 2, n - 1, n} {
		sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, k)
		start := time.Now()
		evs := sub.Collect(5*time.Second, nil)
		require.Empty(t, sub.Err, "afterSeq %d: %s", k, sub.Err)
		require.Less(t, time.Since(start), 2*time.Second, "afterSeq %d: a finished run's subscription must complete after its replay", k)
		subSameLog(t, all[k:], apptest.Durable(t, evs, k), fmt.Sprintf("afterSeq %d", k))
		require.Len(t, evs, n-k, "afterSeq %d: a finished run has no live event left", k)
	}
}

// goTB lets a goroutine use apptest's helpers: a failed assertion stops the goroutine (see
// subGo) instead of calling FailNow off the test goroutine.
type goTB struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

type goStop struct{}

func (g *goTB) Helper() {}
func (g *goTB) Errorf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.msgs = append(g.msgs, fmt.Sprintf(format, args...))
}
func (g *goTB) Error(args ...any)                 { g.Errorf("%s", fmt.Sprint(args...)) }
func (g *goTB) Fatalf(format string, args ...any) { g.Errorf(format, args...); panic(goStop{}) }
func (g *goTB) Fatal(args ...any)                 { g.Error(args...); panic(goStop{}) }
func (g *goTB) FailNow()                          { panic(goStop{}) }
func (g *goTB) Fail()                             { g.Errorf("failed") }
func (g *goTB) Failed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.msgs) > 0
}

// subGo runs fn on a goroutine with a goTB; failures are reported on t when wg is done.
func subGo(t *testing.T, wg *sync.WaitGroup, name string, fn func(tb testing.TB)) {
	g := &goTB{TB: t}
	wg.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(goStop); !ok {
					g.Errorf("panic: %v", p)
				}
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, m := range g.msgs {
				t.Errorf("%s: %s", name, m)
			}
		}()
		fn(g)
	})
}

// TestRunEventsReconnectChurn: 50 subscribers each disconnect 3 times while the run works and
// resume with afterSeq = the last durable seq they saw; every one ends with 1..N, no gap, no
// duplicate, and the terminal event.
func TestRunEventsReconnectChurn(t *testing.T) {
	t.Parallel()
	const subscribers, resumes = 50, 3
	// One user's 50 sockets, past the default cap of 20 per user.
	c := newChatEnvWith(t, "anthropic", map[string]string{"AGENTRY_WS_MAX_SOCKETS_PER_USER": "100"})
	gate := make(chan struct{})
	openGate := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(openGate)
	subToolTurns(c, 8, 150*time.Millisecond, gate)
	s, _ := c.send(t, c.conversation(t, nil), "look eight times", nil)

	type result struct {
		durable []apptest.Event
		midRun  int // resumes made before the subscriber had seen the terminal event
	}
	results := make([]result, subscribers)
	var attached sync.WaitGroup
	attached.Add(subscribers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range subscribers {
		subGo(t, &wg, fmt.Sprintf("subscriber %d", i), func(tb testing.TB) {
			var seen []apptest.Event
			after, midRun := 0, 0
			for round := 0; round <= resumes; round++ {
				sub := c.SubscribeRun(tb, c.s.AccessToken, s.RunID, after)
				if round == 0 {
					attached.Done()
				}
				if round == resumes {
					seen = append(seen, sub.Collect(20*time.Second, nil)...)
					require.Empty(tb, sub.Err, "%s", sub.Err)
					break
				}
				// Read a few durable events (1 to 4), then drop the socket and resume.
				for got := 0; got < 1+(i+round)%4; {
					ev, ok := sub.Next(15 * time.Second)
					if !ok {
						require.Empty(tb, sub.Err, "%s", sub.Err)
						break // the run is over: resuming after the end must complete too
					}
					seen = append(seen, ev)
					if ev.Seq > 0 {
						after = ev.Seq
						got++
					}
				}
				if len(seen) == 0 || !events.Terminal(seen[len(seen)-1].Type) {
					midRun++
				}
				sub.Close()
			}
			results[i] = result{durable: apptest.Durable(tb, seen, 0), midRun: midRun}
		})
	}
	attached.Wait() // every subscriber is attached before the model answers
	openGate()
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d subscribers × %d resumes in %s", subscribers, resumes, time.Since(start))

	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 5*time.Second).Status)
	all, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	require.Greater(t, len(all), 35)
	midRun := 0
	for i, r := range results {
		subSameLog(t, all, r.durable, fmt.Sprintf("subscriber %d", i))
		midRun += r.midRun
	}
	// The resumes must mostly have happened while the run was working, or this tests nothing
	// but replay.
	t.Logf("%d of %d resumes mid-run", midRun, subscribers*resumes)
	require.Greater(t, midRun, subscribers*resumes/2, "too few resumes happened while the run was working")
}

// subPubSubClients returns the ids of the Redis connections in pub/sub mode named name.
func subPubSubClients(rdb *redis.Client, name string) ([]string, error) {
	list, err := rdb.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		return nil, err
	}
	var ids []string
	for line := range strings.SplitSeq(list, "\n") {
		f := map[string]string{}
		for kv := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["name"] == name {
			ids = append(ids, f["id"])
		}
	}
	return ids, nil
}

// TestRunEventsSurviveRedisDrop: the API process's Redis pub/sub connection is killed twice
// while a run streams; its subscriber still gets every durable event 1..N, the terminal one, and
// live token deltas again after each drop.
//
// Only this test's connection is killed, found by the client name given to the process's
// Redis client (client_name in REDIS_URL): CLIENT KILL TYPE pubsub would also cut every other
// test's hub (and other packages' tests sharing the Redis) and make their Redis-only token
// deltas flaky. So this test can run in parallel.
func TestRunEventsSurviveRedisDrop(t *testing.T) {
	t.Parallel()
	rdb := subRedis(t)
	name := fmt.Sprintf("agentry-test-redisdrop-%d", time.Now().UnixNano())
	u, err := url.Parse(subRedisURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("client_name", name)
	u.RawQuery = q.Encode()
	c := subChatEnv(t, map[string]string{"REDIS_URL": u.String()})
	subToolTurns(c, 5, 250*time.Millisecond, nil)

	s, _ := c.send(t, c.conversation(t, nil), "look five times", nil)
	sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	var evs []apptest.Event
	deltasAfter := map[int]int{} // drop number -> deltas received after it
	drops := 0
	var dropped []string
	for drops < 2 {
		ev, ok := sub.Next(10 * time.Second)
		require.True(t, ok, "the run ended before the drops: %v", subSeqTypes(evs))
		evs = append(evs, ev)
		if ev.Type == "message.delta" && drops > 0 {
			deltasAfter[drops]++
		}
		// Drop after the 1st and the 3rd tool call started.
		if ev.Type == "tool.started" && (ev.Seq > 0) && subCount(evs, "tool.started") == 2*drops+1 {
			// The process holds two pub/sub connections (its hub's and its run cancels'), new
			// ones after a drop; both are killed.
			var ids []string
			require.Eventually(t, func() bool {
				var err error
				ids, err = subPubSubClients(rdb, name)
				return err == nil && len(ids) == 2 && !slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(dropped, id) })
			}, 5*time.Second, 10*time.Millisecond, "pub/sub connections named %s: %v (dropped %v)", name, ids, dropped)
			for _, id := range ids {
				require.NoError(t, rdb.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err())
			}
			dropped = append(dropped, ids...)
			drops++
		}
	}
	rest := sub.Collect(20*time.Second, nil)
	require.Empty(t, sub.Err, "%s", sub.Err)
	deltasAfter[drops] += subCount(rest, "message.delta")
	evs = append(evs, rest...)

	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 5*time.Second).Status)
	all, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	subSameLog(t, all, apptest.Durable(t, evs, 0), "events seen across the drops")
	require.Equal(t, "execution.completed", evs[len(evs)-1].Type)
	// The live path came back after each drop: token deltas travel through Redis only.
	require.Positive(t, deltasAfter[1], "no token delta arrived after the first drop")
	require.Positive(t, deltasAfter[2], "no token delta arrived after the second drop")
}

// TestConversationEventsStreamsEveryRun: conversationEvents carries the live events, token
// deltas included, of each run of the conversation (two runs, the second queued behind the
// first).
func TestConversationEventsStreamsEveryRun(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	rdb := subRedis(t)
	replies := map[string]string{
		"first":  "The first answer comes in several words for the deltas.",
		"second": "And here is the second answer, also streamed.",
	}
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		msgs := req.Messages()
		last := fmt.Sprint(msgs[len(msgs)-1]["content"])
		for k, v := range replies {
			if strings.Contains(last, k+" question") {
				return llmtest.Stream(llmtest.Delay(50*time.Millisecond), llmtest.Text(v))
			}
		}
		return llmtest.Stream(llmtest.Text("unexpected"))
	})
	conv := c.conversation(t, nil)
	sub := subSubscribeConversation(t, c.Env, c.s.AccessToken, conv)
	subWaitListening(t, rdb, c.Env, c.s.TenantID)

	first, _ := c.send(t, conv, "first question", nil)
	second, _ := c.send(t, conv, "second question", nil)
	byRun := map[string][]apptest.Event{}
	done := 0
	deadline := time.Now().Add(20 * time.Second)
	for done < 2 {
		ev, ok := sub.Next(time.Until(deadline))
		require.True(t, ok, "conversationEvents ended: %s", sub.Err)
		byRun[ev.RunID] = append(byRun[ev.RunID], ev)
		if ev.Type == "execution.completed" {
			done++
		}
	}
	require.Len(t, byRun, 2, "events of other runs")
	for _, r := range []struct {
		id, reply string
	}{{first.RunID, replies["first"]}, {second.RunID, replies["second"]}} {
		got := byRun[r.id]
		require.NotEmpty(t, got, "no event of run %s", r.id)
		var text strings.Builder
		var durable []int
		for _, e := range got {
			if e.Type == "message.delta" {
				var d struct{ Text string }
				require.NoError(t, json.Unmarshal(e.Data, &d))
				text.WriteString(d.Text)
			}
			if e.Seq > 0 {
				durable = append(durable, e.Seq)
			}
		}
		require.Equal(t, r.reply, text.String(), "the run's token deltas")
		require.Equal(t, "execution.completed", got[len(got)-1].Type)
		// Every durable event of the run went out live. (Publishes of different processes or
		// goroutines, e.g. task.queued from the API and execution.started from the worker, may
		// cross, and conversationEvents does not reorder: compare as sets.)
		stored, err := c.runEvents(t, r.id, 0)
		require.NoError(t, err)
		require.ElementsMatch(t, subSeqs(stored), durable, "run %s", r.id)
	}
}

func subSeqs(evs []apptest.Event) []int {
	out := make([]int, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// TestSubscriptionTenantIsolation: another tenant's conversation, run, run.events, cancelRun,
// runEvents and conversationEvents answer NOT_FOUND exactly like a missing id, and a tenant's
// subscriber never receives another tenant's events.
func TestSubscriptionTenantIsolation(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic") // c.s is tenant A
	rdb := subRedis(t)
	b := c.SignUp(t, "", "Tenant B")
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		if strings.Contains(string(req.Raw), "from A") {
			return llmtest.Stream(llmtest.Text("Secret words of tenant A,"), llmtest.Delay(time.Second), llmtest.Text(" streamed slowly."))
		}
		return llmtest.Stream(llmtest.Text("Tenant B's own answer."))
	})

	// B's conversation, subscribed before A's run streams.
	var bConv struct{ CreateConversation struct{ ID string } }
	c.Do(t, b.AccessToken, `mutation($in: CreateConversationInput!) { createConversation(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"model": c.model}}).Decode(t, &bConv)
	bSub := subSubscribeConversation(t, c.Env, b.AccessToken, bConv.CreateConversation.ID)
	subWaitListening(t, rdb, c.Env, b.TenantID)

	// A's run starts streaming (A's own subscriber sees its deltas: the events exist).
	aConv := c.conversation(t, nil)
	aSub := subSubscribeConversation(t, c.Env, c.s.AccessToken, aConv)
	subWaitListening(t, rdb, c.Env, c.s.TenantID)
	aRun, _ := c.send(t, aConv, "hello from A", nil)
	aEvs := aSub.Collect(15*time.Second, func(e apptest.Event) bool { return e.Type == "message.delta" })

	// While A's run works, B asks for each of A's objects, and for a random id of the same
	// kind: the same answer.
	query := func(q string) func(id string) subErrInfo {
		return func(id string) subErrInfo {
			return subNotFound(t, c.Do(t, b.AccessToken, q, map[string]any{"id": id}), q)
		}
	}
	for _, p := range []struct {
		what, typ, aID string
		do             func(id string) subErrInfo
	}{
		{"cancelRun", "Run", aRun.RunID, query(`mutation($id: ID!) { cancelRun(id: $id) { id status } }`)},
		{"conversation", "Conversation", aConv, query(`query($id: ID!) { conversation(id: $id) { id title } }`)},
		{"conversation.messages", "Conversation", aConv, query(`query($id: ID!) { conversation(id: $id) { messages { edges { node { content } } } } }`)},
		{"run", "Run", aRun.RunID, query(`query($id: ID!) { run(id: $id) { id status } }`)},
		{"run.events", "Run", aRun.RunID, query(`query($id: ID!) { run(id: $id) { events(afterSeq: 0) { seq type data } } }`)},
		{"runEvents", "Run", aRun.RunID, func(id string) subErrInfo {
			s := c.SubscribeRun(t, b.AccessToken, id, 0)
			require.Empty(t, s.Collect(5*time.Second, nil))
			return subErr(t, s, "runEvents")
		}},
		{"runEvents afterSeq", "Run", aRun.RunID, func(id string) subErrInfo {
			s := c.SubscribeRun(t, b.AccessToken, id, 3)
			require.Empty(t, s.Collect(5*time.Second, nil))
			return subErr(t, s, "runEvents afterSeq")
		}},
		{"conversationEvents", "Conversation", aConv, func(id string) subErrInfo {
			s := subSubscribeConversation(t, c.Env, b.AccessToken, id)
			require.Empty(t, s.Collect(5*time.Second, nil))
			return subErr(t, s, "conversationEvents")
		}},
	} {
		foreign := p.do(p.aID)
		missing := p.do(subGlobalID(p.typ, uuid.New()))
		require.Equal(t, missing, foreign, "%s: A's id answers differently from a missing one", p.what)
	}
	// B's cancelRun changed nothing: A's run goes on to complete, streaming to A.
	aEvs = append(aEvs, aSub.Collect(15*time.Second, func(e apptest.Event) bool { return e.Type == "execution.completed" })...)
	require.Equal(t, "COMPLETED", c.waitRun(t, aRun.RunID, 10*time.Second).Status)
	require.GreaterOrEqual(t, subCount(aEvs, "message.delta"), 2)

	// B's own run: B's subscriber gets its events and nothing else, although A's run streamed
	// while it listened.
	var bSent struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	c.Do(t, b.AccessToken, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`,
		map[string]any{"in": map[string]any{"conversationId": bConv.CreateConversation.ID, "content": "hello from B"}}).Decode(t, &bSent)
	bEvs := bSub.Collect(15*time.Second, func(e apptest.Event) bool { return e.Type == "execution.completed" })
	require.Positive(t, subCount(bEvs, "message.delta"))
	for _, e := range bEvs {
		require.Equal(t, bSent.SendMessage.Run.ID, e.RunID, "tenant B received %s of another run", e.Type)
		require.NotContains(t, string(e.Data), "tenant A")
	}
	// And B's runEvents of its own run carries only its own run's events.
	for _, e := range c.SubscribeRun(t, b.AccessToken, bSent.SendMessage.Run.ID, 0).Collect(10*time.Second, nil) {
		require.Equal(t, bSent.SendMessage.Run.ID, e.RunID)
	}
}

// TestLateSubscriberGetsTheStreamedText: subscribers that join while a reply streams (from the
// start of the log, and resuming with afterSeq) first get one message.snapshot with the text
// streamed so far, then the deltas after it: snapshot and deltas make exactly the completed
// message's text, with no delta repeated or missing. A subscriber from before the first token
// gets no snapshot; the snapshot is never stored.
func TestLateSubscriberGetsTheStreamedText(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	words := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s%d ", prefix, i)
		}
		return b.String()
	}
	part1, part2 := words("early", 40), words("late", 40)
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	c.llm.Enqueue(llmtest.Stream(llmtest.Wait(gate1), llmtest.Text(part1), llmtest.Wait(gate2), llmtest.Text(part2)))
	s, _ := c.send(t, c.conversation(t, map[string]any{"agentic": false}), "stream", nil)

	early := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	ev, ok := early.Next(10 * time.Second) // replayed: the subscription is registered
	require.True(t, ok)
	got := []apptest.Event{ev}
	close(gate1)
	lastSeq := 0
	for ev.Type != "message.delta" {
		if ev.Seq > 0 {
			lastSeq = ev.Seq
		}
		ev, ok = early.Next(10 * time.Second)
		require.True(t, ok)
		got = append(got, ev)
	}

	// Two subscribers join mid-reply: from the start, and resuming after what early saw.
	late := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	resumed := c.SubscribeRun(t, c.s.AccessToken, s.RunID, lastSeq)
	lateEvs := late.Collect(10*time.Second, func(e apptest.Event) bool { return e.Type == "message.snapshot" })
	resumedEvs := resumed.Collect(10*time.Second, func(e apptest.Event) bool { return e.Type == "message.snapshot" })
	close(gate2)
	got = append(got, early.Collect(15*time.Second, nil)...)
	lateEvs = append(lateEvs, late.Collect(15*time.Second, nil)...)
	resumedEvs = append(resumedEvs, resumed.Collect(15*time.Second, nil)...)

	type piece struct {
		CallIndex, Index int
		Text             string
		Role, Content    string
	}
	decode := func(e apptest.Event) piece {
		var p piece
		require.NoError(t, json.Unmarshal(e.Data, &p))
		return p
	}
	// text rebuilds the reply from a subscriber's snapshot and deltas, checking that every
	// delta continues where the one before it (or the snapshot) left off.
	text := func(name string, evs []apptest.Event) (streamed, completed string, snapshots int) {
		next := 0
		for _, e := range evs {
			switch e.Type {
			case "message.snapshot":
				p := decode(e)
				snapshots++
				require.Zero(t, e.Seq, "%s: a snapshot is not stored", name)
				require.Empty(t, streamed, "%s: the snapshot comes before any delta", name)
				streamed, next = p.Text, p.Index+1
			case "message.delta":
				p := decode(e)
				require.Equal(t, next, p.Index, "%s: delta %d after %d: a gap or a repeat", name, p.Index, next-1)
				streamed += p.Text
				next++
			case "message.completed":
				if p := decode(e); p.Role == "ASSISTANT" {
					completed = p.Content
				}
			}
		}
		return streamed, completed, snapshots
	}
	want := strings.TrimSpace(part1 + part2)
	for name, evs := range map[string][]apptest.Event{"early": got, "late": lateEvs, "resumed": resumedEvs} {
		require.Equal(t, "execution.completed", evs[len(evs)-1].Type, name)
		streamed, completed, snapshots := text(name, evs)
		require.Equal(t, want, strings.TrimSpace(completed), name)
		require.Equal(t, completed, streamed, "%s: the streamed text is the completed message's", name)
		if name == "early" {
			require.Zero(t, snapshots, "a subscriber from before the first token needs no snapshot")
		} else {
			require.Equal(t, 1, snapshots, name)
		}
	}
	require.Equal(t, got[len(got)-1].Seq, apptest.Durable(t, lateEvs, 0)[len(apptest.Durable(t, lateEvs, 0))-1].Seq)
	apptest.Durable(t, resumedEvs, lastSeq)
	require.Zero(t, countType(c.eventsOf(t, s.RunID), "message.snapshot"), "the snapshot is not in the log")
}
