package graph_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/config"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/ratelimit"
)

const (
	usSetBudget = `mutation($in: SetBudgetInput!) { setBudget(input: $in) {
		id scope period tokenLimit costLimitMicros spentTokens spentMicros reservedTokens reservedMicros periodStart user { id } } }`
	usBudgets = `{ budgets { id scope period tokenLimit spentTokens reservedTokens user { id } } }`
	usSummary = `query($from: Time!, $to: Time!, $g: UsageGroupBy!) { usageSummary(from: $from, to: $to, groupBy: $g) {
		key calls inputTokens outputTokens costMicros } }`
	usPlatform = `query($from: Time!, $to: Time!, $g: PlatformUsageGroupBy!) { platformUsage(from: $from, to: $to, groupBy: $g) {
		key calls inputTokens outputTokens costMicros } }`
	usActivity = `query($first: Int, $after: String) { activity(first: $first, after: $after) {
		edges { cursor node { id status inputTokens outputTokens costMicros user { id email } } } pageInfo { hasNextPage endCursor } } }`
)

type usBudget struct {
	ID             string
	Scope, Period  string
	TokenLimit     *int64
	SpentTokens    int64
	ReservedTokens int64
	User           *struct{ ID string }
}

type usBucket struct {
	Key                                          string
	Calls, InputTokens, OutputTokens, CostMicros int64
}

// setBudget sets a budget with token.
func (c *chatEnv) setBudget(t *testing.T, token string, in map[string]any) usBudget {
	t.Helper()
	var out struct{ SetBudget usBudget }
	c.Do(t, token, usSetBudget, map[string]any{"in": in}).Decode(t, &out)
	return out.SetBudget
}

// budgetRow reads a budget's counters straight from the table (every tenant).
func (c *chatEnv) budgetRow(t *testing.T, id string) (spent, reserved, limit int64) {
	t.Helper()
	uid := approvalUUID(t, "Budget", id)
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT spent_tokens, reserved_tokens, coalesce(token_limit, -1) FROM budget_totals WHERE id = $1`, uid).Scan(&spent, &reserved, &limit))
	})
	return spent, reserved, limit
}

func (c *chatEnv) ownerTx(t testing.TB, fn func(tx pgx.Tx)) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	fn(tx)
	require.NoError(t, tx.Commit(ctx))
}

// probeReservation runs one chat turn under a roomy budget and returns what its call reserved
// (the worst case of a call like it) and what it settled.
func (c *chatEnv) probeReservation(t *testing.T, conv string) (worst, actual int64) {
	t.Helper()
	s, _ := c.send(t, conv, "probe", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT reserved_tokens, actual_tokens FROM reservations WHERE run_id = $1`,
			approvalUUID(t, "Run", s.RunID)).Scan(&worst, &actual))
	})
	return worst, actual
}

// TestBudgetHoldsUnder200ConcurrentTurns: 200 chat turns sent at once through sendMessage
// against a token budget that fits about 20. A watcher polling the budget every 10 ms never sees
// spent + reserved above the limit; the final spend is within it; every refusal is
// BUDGET_EXCEEDED (at sendMessage) or a run ending FAILED with terminationReason
// budget_exceeded; no reservation is left.
func TestBudgetHoldsUnder200ConcurrentTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("200 turns")
	}
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("fine"), llmtest.Usage(10, 1000, 0)))
	c.settings(t, map[string]any{"maxTokensPerTask": 1024})
	bud := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 1_000_000})
	convs := make([]string, 200)
	for i := range convs {
		convs[i] = c.conversation(t, map[string]any{"agentic": false})
	}
	worst, actual := c.probeReservation(t, convs[0])
	require.Equal(t, int64(1010), actual)
	require.Greater(t, worst, actual, "the worst case covers the call")
	spent, _, _ := c.budgetRow(t, bud.ID)
	limit := spent + 20*worst + worst/2 // about 20 turns
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": limit})

	stop := make(chan struct{})
	watched := make(chan error, 1)
	var peak atomic.Int64
	go func() {
		watched <- usWatch(c.OwnerURL, stop, func(s, r, l int64) error {
			if r > peak.Load() {
				peak.Store(r)
			}
			if s+r > l {
				return fmt.Errorf("spent %d + reserved %d > limit %d", s, r, l)
			}
			return nil
		}, approvalUUID(t, "Budget", bud.ID).String())
	}()

	var admitted, refused atomic.Int64
	runIDs := make(chan string, len(convs))
	var wg sync.WaitGroup
	errs := make(chan string, len(convs))
	for _, conv := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, res := c.send(t, conv, "spend", nil)
			if res != nil && len(res.Errors) > 0 {
				if res.Code() != "BUDGET_EXCEEDED" {
					errs <- string(res.Body)
				}
				refused.Add(1)
				return
			}
			admitted.Add(1)
			runIDs <- s.RunID
		}()
	}
	wg.Wait()
	close(runIDs)
	close(errs)
	for e := range errs {
		t.Errorf("a refusal that is not BUDGET_EXCEEDED: %s", e)
	}
	completed, failed := 0, 0
	for id := range runIDs {
		r := c.waitRun(t, id, 60*time.Second)
		switch {
		case r.Status == "COMPLETED":
			completed++
		case r.Status == "FAILED" && r.TerminationReason != nil && *r.TerminationReason == "budget_exceeded":
			failed++
		default:
			t.Errorf("run %s ended %s (%v): %v", id, r.Status, deref(r.TerminationReason), deref(r.Error))
		}
	}
	close(stop)
	require.NoError(t, usWait(watched))
	require.Positive(t, peak.Load(), "the watcher saw reservations")

	final, reserved, _ := c.budgetRow(t, bud.ID)
	t.Logf("limit %d (worst case %d per turn): %d completed, %d failed budget_exceeded, %d refused at sendMessage; spent %d", limit, worst, completed, failed, refused.Load(), final)
	require.LessOrEqual(t, final, limit, "the final spend is within the limit")
	require.Zero(t, reserved, "no reservation left")
	require.Zero(t, c.count(t, `SELECT count(*) FROM reservations WHERE status = 'HELD'`))
	require.Equal(t, spent+int64(completed)*actual, final, "spent is the sum of the completed turns")
	require.GreaterOrEqual(t, completed, 18, "about 20 turns fit")
	require.LessOrEqual(t, int64(completed), (limit-spent)/actual)
	require.Equal(t, 200, completed+failed+int(refused.Load()))
	// Usage records: one per completed call, none for a refused one.
	require.Equal(t, completed+1, c.count(t, `SELECT count(*) FROM usage_records`))
	// A turn that cannot reserve its call is admitted but ends budget_exceeded; once nothing at
	// all is left, sendMessage refuses.
	if final+worst > limit {
		s, _ := c.send(t, convs[1], "one more", nil)
		r := c.waitRun(t, s.RunID, 15*time.Second)
		require.Equal(t, "budget_exceeded", deref(r.TerminationReason))
	}
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": final})
	_, res := c.send(t, convs[2], "and another", nil)
	require.Equal(t, "BUDGET_EXCEEDED", res.Code(), "%s", res.Body)
}

// TestBudgetOverageAndActivity: a model reporting far more output than the call reserved is
// settled in full (the overage recorded on the reservation); the next sendMessage is refused
// BUDGET_EXCEEDED; the overspend is at most that call's overage. An admin's tenantActivity
// shows the run's status events and budget.warning / budget.exceeded; a member may not
// subscribe.
func TestBudgetOverageAndActivity(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("a long answer"), llmtest.Usage(100, 20_000, 0)))
	c.settings(t, map[string]any{"maxTokensPerTask": 1024}) // reserves about 1024 + the input
	const limit = 5000
	bud := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "MONTH", "tokenLimit": limit})
	require.Equal(t, "TENANT", bud.Scope)
	require.Nil(t, bud.User)

	sub := apptest.Subscribe(t, c.Server.URL, c.s.AccessToken, `subscription { tenantActivity { seq runId type data } }`, nil)
	// The process's hub listens to the tenant's channel once the subscription is registered.
	channel := events.Channel(c.App.Config.RedisPrefix, approvalUUID(t, "Tenant", c.s.TenantID))
	require.Eventually(t, func() bool {
		n, err := c.App.Redis.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && n[channel] > 0
	}, 10*time.Second, 5*time.Millisecond, "the subscription did not reach the hub")
	conv := c.conversation(t, map[string]any{"agentic": false})
	s, _ := c.send(t, conv, "write a lot", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "the call had been admitted; its output is kept")
	require.Equal(t, int64(20_000), r.OutputTokens)

	spent, reserved, _ := c.budgetRow(t, bud.ID)
	require.Equal(t, int64(20_100), spent)
	require.Zero(t, reserved)
	var held, used int64
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT reserved_tokens, actual_tokens FROM reservations WHERE run_id = $1`,
			approvalUUID(t, "Run", s.RunID)).Scan(&held, &used))
	})
	overage := used - held
	require.Positive(t, overage, "the overage is recorded")
	require.LessOrEqual(t, spent-limit, overage, "overspent by at most one call's overage")

	_, res := c.send(t, conv, "more", nil)
	require.Equal(t, "BUDGET_EXCEEDED", res.Code(), "%s", res.Body)
	require.Equal(t, 1, c.llm.Calls(), "the refused message made no call")

	// The activity feed: the run's status changes and the budget crossing 80% and 100%.
	want := []string{"task.queued", "execution.started", "execution.completed", "budget.warning", "budget.exceeded"}
	seen := map[string]json.RawMessage{}
	for len(seen) < len(want) {
		ev, ok := sub.Next(10 * time.Second)
		require.True(t, ok, "subscription ended: %s", sub.Err)
		require.Regexp(t, `^(task|execution|budget)\.`, ev.Type, "only run status and budget events")
		if slices.Contains(want, ev.Type) {
			seen[ev.Type] = ev.Data
		}
	}
	for _, typ := range want {
		require.Contains(t, seen, typ)
	}
	var data struct {
		RunID       string `json:"runId"`
		SpentTokens int64  `json:"spentTokens"`
		TokenLimit  int64  `json:"tokenLimit"`
		Scope       string `json:"scope"`
	}
	require.NoError(t, json.Unmarshal(seen["budget.exceeded"], &data))
	require.Equal(t, int64(20_100), data.SpentTokens)
	require.Equal(t, int64(limit), data.TokenLimit)
	require.Equal(t, "TENANT", data.Scope)
	require.Equal(t, s.RunID, data.RunID, "the run that caused it, by global id")

	member := c.joinAsMember(t)
	msub := apptest.Subscribe(t, c.Server.URL, member.token, `subscription { tenantActivity { seq type } }`, nil)
	_, ok := msub.Next(5 * time.Second)
	require.False(t, ok)
	require.Contains(t, string(msub.Err), "FORBIDDEN")
}

// TestBudgetEndsARunMidway: a budget that pays for two model calls of an agentic run refuses
// the third: the run ends FAILED, TERMINAL, terminationReason budget_exceeded, and keeps what
// the first two calls produced.
func TestBudgetEndsARunMidway(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"maxTokensPerTask": 131072, "autoExecute": true, "approvalThreshold": 100})
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("l%d", n), "list_files", `{}`), llmtest.Usage(10, 1000, 0))
	})
	bud := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "USER", "userId": c.s.UserID, "period": "DAY", "tokenLimit": 10_000_000})
	require.Equal(t, c.s.UserID, bud.User.ID)

	// A probe: one answer without tools gives the worst case of a first call.
	probe := c.conversation(t, nil)
	c.llm.Enqueue(llmtest.Stream(llmtest.Text("done"), llmtest.Usage(10, 1000, 0)))
	worst, _ := c.probeReservation(t, probe)
	spent, _, _ := c.budgetRow(t, bud.ID)
	// Room for two calls (1010 each, the second reserving a little more than the first), not a
	// third.
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "USER", "userId": c.s.UserID, "period": "DAY", "tokenLimit": spent + 1010 + worst + 500})
	calls := c.llm.Calls()

	s, _ := c.send(t, c.conversation(t, nil), "list the files, again and again", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "FAILED", r.Status)
	require.Equal(t, "budget_exceeded", *r.TerminationReason, "%v", deref(r.Error))
	require.Contains(t, *r.Error, "budget")
	require.Equal(t, 2, c.llm.Calls()-calls, "the third call was never made")
	require.Len(t, r.ToolCalls, 2, "the partial output is kept")
	require.Equal(t, int64(2000), r.OutputTokens)
	var class string
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT failure_class FROM runs WHERE id = $1`, approvalUUID(t, "Run", s.RunID)).Scan(&class))
	})
	require.Equal(t, "TERMINAL", class)
	require.Equal(t, 2, c.count(t, `SELECT count(*) FROM messages WHERE role = 'ASSISTANT' AND run_id = $1`, approvalUUID(t, "Run", s.RunID)))
	_, reserved, _ := c.budgetRow(t, bud.ID)
	require.Zero(t, reserved)
	require.Zero(t, c.count(t, `SELECT count(*) FROM reservations WHERE status = 'HELD'`))
}

type usMember struct{ token, userID string }

// missingTask is the global id of a task that does not exist.
var missingTask = base64.RawURLEncoding.EncodeToString([]byte("Task:0193f000-0000-7000-8000-000000000000"))

// joinAsMember adds a new user to c's tenant as a MEMBER and logs them in there.
func (c *chatEnv) joinAsMember(t *testing.T) usMember {
	t.Helper()
	email := fmt.Sprintf("member-%d@example.com", time.Now().UnixNano())
	m := c.SignUp(t, email, "")
	p := memJoin(t, c.Env, c.s.AccessToken, m, c.s.TenantID, "MEMBER")
	return usMember{token: p.AccessToken, userID: m.UserID}
}

func (c *chatEnv) logIn(t *testing.T, email, password, tenantID string) string {
	t.Helper()
	var out struct{ LogIn struct{ AccessToken string } }
	c.Do(t, "", `mutation($in: LogInInput!) { logIn(input: $in) { accessToken } }`,
		map[string]any{"in": map[string]any{"email": email, "password": password, "tenantId": tenantID}}).Decode(t, &out)
	return out.LogIn.AccessToken
}

func (c *chatEnv) summary(t *testing.T, token, query string, groupBy string) []usBucket {
	t.Helper()
	var out struct {
		UsageSummary  []usBucket
		PlatformUsage []usBucket
	}
	vars := map[string]any{"from": time.Now().Add(-time.Hour).Format(time.RFC3339), "to": time.Now().Add(time.Hour).Format(time.RFC3339), "g": groupBy}
	c.Do(t, token, query, vars).Decode(t, &out)
	if query == usPlatform {
		return out.PlatformUsage
	}
	return out.UsageSummary
}

func sumCalls(bs []usBucket) (n int64) {
	for _, b := range bs {
		n += b.Calls
	}
	return n
}

// TestUsageAPI: who may set, read and delete budgets; usage summaries per grouping equal the
// runs' usage; a member sees only their own usage and runs; another tenant's never appears;
// platformUsage is for platform admins.
func TestUsageAPI(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("ok"), llmtest.Usage(100, 10, 0)))
	member := c.joinAsMember(t)

	// Budgets: admins set them, members read the tenant's and their own.
	res := c.Do(t, member.token, usSetBudget, map[string]any{"in": map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 5}})
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	tenantBudget := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "MONTH", "costLimitMicros": 50_000_000})
	ownerBudget := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "USER", "userId": c.s.UserID, "period": "DAY", "tokenLimit": 1_000_000})
	memberBudget := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "USER", "userId": member.userID, "period": "DAY", "tokenLimit": 1_000_000})
	res = c.Do(t, c.s.AccessToken, usSetBudget, map[string]any{"in": map[string]any{"scope": "USER", "period": "DAY"}})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	var list struct{ Budgets []usBudget }
	c.Do(t, c.s.AccessToken, usBudgets, nil).Decode(t, &list)
	require.Len(t, list.Budgets, 3)
	c.Do(t, member.token, usBudgets, nil).Decode(t, &list)
	ids := []string{}
	for _, b := range list.Budgets {
		ids = append(ids, b.ID)
	}
	require.ElementsMatch(t, []string{tenantBudget.ID, memberBudget.ID}, ids)
	var node struct{ Node *struct{ ID, Period string } }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { node(id: $id) { id ... on Budget { period } } }`, map[string]any{"id": ownerBudget.ID}).Decode(t, &node)
	require.Equal(t, "DAY", node.Node.Period)
	requireNodeNull(t, c.Do(t, member.token, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": ownerBudget.ID}), "node(another user's budget)")

	// Usage: two turns of the owner, one of the member.
	ownerConv := c.conversation(t, map[string]any{"agentic": false})
	for range 2 {
		s, _ := c.send(t, ownerConv, "hi", nil)
		require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	}
	var mc struct{ CreateConversation struct{ ID string } }
	c.Do(t, member.token, `mutation($in: CreateConversationInput!) { createConversation(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"model": c.model, "agentic": false}}).Decode(t, &mc)
	var ms struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	c.Do(t, member.token, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`,
		map[string]any{"in": map[string]any{"conversationId": mc.CreateConversation.ID, "content": "hello"}}).Decode(t, &ms)
	require.Equal(t, "COMPLETED", c.waitRun(t, ms.SendMessage.Run.ID, 15*time.Second).Status)

	// Another tenant's usage exists alongside.
	other := c.SignUp(t, "", "")
	var oc struct{ CreateConversation struct{ ID string } }
	c.Do(t, other.AccessToken, `mutation($in: CreateConversationInput!) { createConversation(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"model": c.model, "agentic": false}}).Decode(t, &oc)
	var osent struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	c.Do(t, other.AccessToken, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`,
		map[string]any{"in": map[string]any{"conversationId": oc.CreateConversation.ID, "content": "elsewhere"}}).Decode(t, &osent)
	require.Eventually(t, func() bool { return c.count(t, `SELECT count(*) FROM usage_records`) == 4 }, 15*time.Second, 20*time.Millisecond)

	for _, g := range []string{"DAY", "USER", "MODEL", "RUN_KIND"} {
		all := c.summary(t, c.s.AccessToken, usSummary, g)
		require.Equal(t, int64(3), sumCalls(all), "admin, %s: the tenant's three calls", g)
		for _, b := range all {
			require.Equal(t, b.Calls*100, b.InputTokens, g)
			require.Equal(t, b.Calls*10, b.OutputTokens, g)
		}
		mine := c.summary(t, member.token, usSummary, g)
		require.Equal(t, int64(1), sumCalls(mine), "member, %s: their own call only", g)
	}
	byUser := c.summary(t, c.s.AccessToken, usSummary, "USER")
	require.ElementsMatch(t, []usBucket{
		{Key: c.s.UserID, Calls: 2, InputTokens: 200, OutputTokens: 20, CostMicros: costOf(byUser, c.s.UserID)},
		{Key: member.userID, Calls: 1, InputTokens: 100, OutputTokens: 10, CostMicros: costOf(byUser, member.userID)},
	}, byUser)
	require.Equal(t, 2*costOf(byUser, member.userID), costOf(byUser, c.s.UserID), "costs from the catalogue, per call")
	require.Positive(t, costOf(byUser, member.userID))
	require.Equal(t, []usBucket{{Key: "anthropic:claude-sonnet-4-5", Calls: 3, InputTokens: 300, OutputTokens: 30, CostMicros: 3 * costOf(byUser, member.userID)}},
		c.summary(t, c.s.AccessToken, usSummary, "MODEL"))
	require.Equal(t, []usBucket{{Key: member.userID, Calls: 1, InputTokens: 100, OutputTokens: 10, CostMicros: costOf(byUser, member.userID)}},
		c.summary(t, member.token, usSummary, "USER"), "a member cannot see another user's usage")
	otherUse := c.summary(t, other.AccessToken, usSummary, "USER")
	require.Len(t, otherUse, 1)
	require.Equal(t, other.UserID, otherUse[0].Key, "the other tenant sees only its own")

	// Activity: admins see every run of the tenant with its user, members their own.
	var act struct {
		Activity struct {
			Edges []struct {
				Node struct {
					ID, Status  string
					InputTokens int64
					CostMicros  int64
					User        struct{ ID, Email string }
				}
			}
		}
	}
	c.Do(t, c.s.AccessToken, usActivity, map[string]any{"first": 10}).Decode(t, &act)
	require.Len(t, act.Activity.Edges, 3)
	require.Equal(t, member.userID, act.Activity.Edges[0].Node.User.ID, "newest first")
	require.Equal(t, int64(100), act.Activity.Edges[0].Node.InputTokens)
	require.Positive(t, act.Activity.Edges[0].Node.CostMicros)
	c.Do(t, member.token, usActivity, map[string]any{"first": 10}).Decode(t, &act)
	require.Len(t, act.Activity.Edges, 1)
	require.Equal(t, member.userID, act.Activity.Edges[0].Node.User.ID)

	// Platform usage: platform admins only, across tenants.
	vars := map[string]any{"from": time.Now().Add(-time.Hour).Format(time.RFC3339), "to": time.Now().Add(time.Hour).Format(time.RFC3339), "g": "TENANT"}
	res = c.Do(t, c.s.AccessToken, usPlatform, vars)
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	_, err := c.App.Tenancy.GrantPlatformAdmin(context.Background(), c.s.Email, true)
	require.NoError(t, err)
	platform := c.logIn(t, c.s.Email, c.s.Password, c.s.TenantID)
	byTenant := c.summary(t, platform, usPlatform, "TENANT")
	require.ElementsMatch(t, []string{c.s.TenantID, other.TenantID}, []string{byTenant[0].Key, byTenant[1].Key})
	require.Equal(t, int64(4), sumCalls(byTenant))
	require.Equal(t, int64(4), sumCalls(c.summary(t, platform, usPlatform, "DAY")))

	// Deleting: admins only.
	res = c.Do(t, member.token, `mutation($id: ID!) { deleteBudget(id: $id) }`, map[string]any{"id": memberBudget.ID})
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
	var del struct{ DeleteBudget bool }
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { deleteBudget(id: $id) }`, map[string]any{"id": memberBudget.ID}).Decode(t, &del)
	require.True(t, del.DeleteBudget)
	res = c.Do(t, other.AccessToken, `mutation($id: ID!) { deleteBudget(id: $id) }`, map[string]any{"id": tenantBudget.ID})
	require.Equal(t, "NOT_FOUND", res.Code(), "another tenant's budget: %s", res.Body)
}

func costOf(bs []usBucket, key string) int64 {
	for _, b := range bs {
		if b.Key == key {
			return b.CostMicros
		}
	}
	return -1
}

// TestRateLimitOverHTTP: with spending limited to 10/s with bursts of 20, hammering runTask for
// 5 s gets between 50 and 71 requests through; every refusal is RATE_LIMITED with retryAfter
// (seconds) in its extensions. logIn is limited per client IP.
func TestRateLimitOverHTTP(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{
		"AGENTRY_RATE_LIMIT_SPEND": "10/s burst 20", "AGENTRY_RATE_LIMIT_AUTH": "4/m burst 4",
	}})
	s := env.SignUp(t, "", "") // one of the IP's 4
	// An id that does not exist: an admitted request answers NOT_FOUND, cheaply.
	missing := map[string]any{"id": missingTask}
	allowed, limited := 0, 0
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		res := env.Do(t, s.AccessToken, `mutation($id: ID!) { runTask(id: $id) { id } }`, missing)
		switch res.Code() {
		case "RATE_LIMITED":
			limited++
			ra, ok := res.Errors[0].Extensions["retryAfter"].(float64)
			require.True(t, ok, "retryAfter in the extensions: %s", res.Body)
			require.GreaterOrEqual(t, ra, 1.0)
			require.Equal(t, []any{"runTask"}, res.Errors[0].Path)
		case "NOT_FOUND":
			allowed++
		default:
			t.Fatalf("unexpected answer: %s", res.Body)
		}
	}
	t.Logf("allowed %d, limited %d in 5 s", allowed, limited)
	require.GreaterOrEqual(t, allowed, 50)
	require.LessOrEqual(t, allowed, 71)
	require.Positive(t, limited)
	// Reads are not limited.
	for range 30 {
		require.Empty(t, env.Do(t, s.AccessToken, `{ viewer { role } }`, nil).Errors)
	}

	const logIn = `mutation($in: LogInInput!) { logIn(input: $in) { accessToken } }`
	bad := map[string]any{"in": map[string]any{"email": s.Email, "password": "wrong password!"}}
	for range 3 {
		require.Equal(t, "UNAUTHENTICATED", env.Do(t, "", logIn, bad).Code())
	}
	res := env.Do(t, "", logIn, bad)
	require.Equal(t, "RATE_LIMITED", res.Code(), "%s", res.Body)
	require.GreaterOrEqual(t, res.Errors[0].Extensions["retryAfter"].(float64), 1.0)
	res = env.Do(t, "", logIn, map[string]any{"in": map[string]any{"email": s.Email, "password": s.Password}})
	require.Equal(t, "RATE_LIMITED", res.Code(), "even the right password, from this IP, for now")
}

// TestRateLimitAheadCommitsNothingWhenRefused: a sendMessage whose tenant bucket had plenty of
// room a moment ago runs while the limiter asks Redis; when Redis refuses after all (another
// process drained the bucket meanwhile) the request answers RATE_LIMITED and nothing of it is
// stored: the refusal reaches the transaction before its commit.
func TestRateLimitAheadCommitsNothingWhenRefused(t *testing.T) {
	t.Parallel()
	c := newChatEnvWith(t, "anthropic", map[string]string{"AGENTRY_RATE_LIMIT_SPEND": "1/m burst 20"})
	conv := c.conversation(t, nil)
	_, res := c.send(t, conv, "first", nil) // the limiter learns the plan and the bucket's room
	require.Empty(t, res.Errors, "%s", res.Body)
	// Another process (a limiter of its own on the same Redis) spends the rest of the bucket.
	other := ratelimit.New(ratelimit.Options{Redis: c.App.Redis, Prefix: c.App.Config.RedisPrefix, DB: c.App.DB,
		Spend: map[string]config.RateLimit{"": {Rate: 1, Burst: 20, Period: time.Minute}}, Log: c.App.Log})
	a := auth.Actor{TenantID: subUUID(t, c.s.TenantID), UserID: subUUID(t, c.s.UserID), Role: auth.RoleOwner}
	for range 40 {
		if other.Spend(context.Background(), a) != nil {
			break
		}
	}
	require.Equal(t, apperr.RateLimited, apperr.CodeOf(other.Spend(context.Background(), a)))
	_, res = c.send(t, conv, "second", nil)
	require.Equal(t, "RATE_LIMITED", res.Code(), "%s", res.Body)
	require.Len(t, res.Errors, 1, "%s", res.Body)
	require.GreaterOrEqual(t, res.Errors[0].Extensions["retryAfter"].(float64), 1.0)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs`), "the refused message started no run")
	require.Equal(t, 0, c.count(t, `SELECT count(*) FROM messages WHERE content = 'second'`), "and stored nothing")
}

// TestRateLimiterRedisUnreachable: with the limiter's Redis unreachable, spending mutations fail
// closed with a clear RATE_LIMITED error while queries (and logIn) keep working.
func TestRateLimiterRedisUnreachable(t *testing.T) {
	t.Parallel()
	c := newChatEnvWith(t, "anthropic", map[string]string{"AGENTRY_RATE_LIMIT_SPEND": "10/s burst 20", "AGENTRY_RATE_LIMIT_AUTH": "10/m"})
	conv := c.conversation(t, nil)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	c.App.RateLimits.UseRedis(dead)

	_, res := c.send(t, conv, "hello", nil)
	require.Equal(t, "RATE_LIMITED", res.Code(), "%s", res.Body)
	require.Contains(t, res.Errors[0].Message, "unavailable")
	require.Equal(t, 1.0, res.Errors[0].Extensions["retryAfter"])
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs`), "nothing was started")
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { runTask(id: $id) { id } }`, map[string]any{"id": missingTask})
	require.Equal(t, "RATE_LIMITED", res.Code(), "%s", res.Body)

	for _, q := range []string{`{ viewer { role } }`, usBudgets, `{ conversations { edges { node { id } } } }`, `{ activity { edges { node { id } } } }`} {
		res := c.Do(t, c.s.AccessToken, q, nil)
		require.Empty(t, res.Errors, "%s: %s", q, res.Body)
	}
	c.summary(t, c.s.AccessToken, usSummary, "DAY") // answers (no usage yet)
	require.NotEmpty(t, c.logIn(t, c.s.Email, c.s.Password, c.s.TenantID), "logIn goes on")
	// Creating a conversation does not spend: it still works.
	c.conversation(t, nil)
}

// TestReservationOfAKilledWorker: a worker SIGKILLed during an LLM call leaves its reservation
// held; the run is taken over (its lease expired) and the new attempt gives the old hold back
// before reserving the call again, so the call is settled exactly once, nothing stays reserved
// and the budget never goes negative (nor above its limit).
func TestReservationOfAKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	t.Parallel()
	srv := llmtest.NewOpenAIServer(t)
	llmEnv := map[string]string{"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": srv.BaseURL(), "AGENTRY_DEFAULT_MODEL": "openai:gpt-4o-mini"}
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: llmEnv})
	c := &chatEnv{Env: env, llm: srv, model: "openai:gpt-4o-mini", s: env.SignUp(t, "", "")}
	var calls atomic.Int64
	srv.SetResponder(func(llmtest.Request) llmtest.Reply {
		if calls.Add(1) == 1 {
			return llmtest.Stream(llmtest.Text("thinking"), llmtest.Delay(time.Minute), llmtest.Text("never"))
		}
		return llmtest.Stream(llmtest.Text("done"), llmtest.Usage(10, 100, 0))
	})
	const limit = 1_000_000
	bud := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": limit})
	wenv := map[string]string{"AGENTRY_RETRY_BASE_DELAY": "100ms"}
	for k, v := range llmEnv {
		wenv[k] = v
	}
	first := usStartWorker(t, env, wenv)
	s, _ := c.send(t, c.conversation(t, map[string]any{"agentic": false}), "hello", nil)
	runUUID := approvalUUID(t, "Run", s.RunID)
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM reservations WHERE run_id = $1 AND status = 'HELD'`, runUUID) == 1 && calls.Load() == 1
	}, 15*time.Second, 50*time.Millisecond, "the call is in flight with its reservation")
	_, held, _ := c.budgetRow(t, bud.ID)
	require.Positive(t, held)

	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		watched <- usWatch(c.OwnerURL, stop, func(s, r, _ int64) error {
			if r < 0 || s < 0 || s+r > limit || r > held {
				return fmt.Errorf("spent %d, reserved %d (held %d)", s, r, held)
			}
			return nil
		}, approvalUUID(t, "Budget", bud.ID).String())
	}()
	_ = first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	usStartWorker(t, env, wenv)

	r := c.waitRun(t, s.RunID, 90*time.Second)
	close(stop)
	require.NoError(t, usWait(watched))
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.Equal(t, int64(2), calls.Load(), "the call was made again by the new attempt")
	spent, reserved, _ := c.budgetRow(t, bud.ID)
	require.Zero(t, reserved, "the killed attempt's hold was given back")
	require.Equal(t, int64(110), spent, "the call was settled once")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM reservations WHERE run_id = $1`, runUUID))
	var status string
	var attempt, runAttempt int
	var actual int64
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT r.status, r.attempt, coalesce(r.actual_tokens, -1), runs.attempt FROM reservations r JOIN runs ON runs.id = r.run_id WHERE r.run_id = $1`, runUUID).Scan(&status, &attempt, &actual, &runAttempt))
	})
	require.Equal(t, "SETTLED", status)
	require.Equal(t, int64(110), actual)
	require.Greater(t, attempt, 1, "settled by a later attempt")
	require.Equal(t, runAttempt, attempt)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1`, runUUID))
}

type usWorker struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// usStartWorker runs an `agentry worker` process against env, stopped when t ends.
func usStartWorker(t *testing.T, env *apptest.Env, extra map[string]string) *usWorker {
	t.Helper()
	apptest.Serial(t)
	cmd := exec.Command(apptest.Binary(t), "worker")
	cmd.Env = env.ProcessEnv(extra)
	require.NoError(t, cmd.Start())
	w := &usWorker{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-w.done
		}
	})
	return w
}

// usWatch polls a budget's counters every 10 ms on one connection of its own until stop closes,
// returning check's first error (or a failure to read).
func usWatch(ownerURL string, stop <-chan struct{}, check func(spent, reserved, limit int64) error, budgetID string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	polls := 0
	for {
		select {
		case <-stop:
			if polls < 10 {
				return fmt.Errorf("the watcher polled only %d times", polls)
			}
			return nil
		case <-time.After(10 * time.Millisecond):
		}
		var s, r, l int64
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT spent_tokens, reserved_tokens, coalesce(token_limit, -1) FROM budget_totals WHERE id = $1`, budgetID).Scan(&s, &r, &l)
		})
		if err != nil {
			return fmt.Errorf("watch budget: %w", err)
		}
		polls++
		if err := check(s, r, l); err != nil {
			return err
		}
	}
}

// usWait waits for a watcher's verdict, at most 10 s.
func usWait(watched <-chan error) error {
	select {
	case err := <-watched:
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the watcher did not stop")
	}
}

// TestEveryCallReservedAfterTheLease: with budgets on, the first model call of a chat turn is
// reserved in the transaction that acquires the run, so it commits with the lease before the call
// is made: its reservation carries that transaction's now(), not later than the run's started_at
// (the clock time of the acquiring statement), which any later transaction's now() exceeds. A
// later call is reserved in a transaction of its own. Every call settles once.
func TestEveryCallReservedAfterTheLease(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	subToolTurns(c, 1, 0, nil) // a tool call, then the answer: two model calls
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 10_000_000})
	s, _ := c.send(t, c.conversation(t, nil), "look once", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))

	type res struct {
		call   int
		status string
		when   string
	}
	var got []res
	c.ownerTx(t, func(tx pgx.Tx) {
		rows, err := tx.Query(context.Background(), `SELECT v.call_index, v.status,
				CASE WHEN v.created_at <= r.started_at THEN 'with the lease' ELSE 'after' END
			FROM reservations v JOIN runs r ON r.tenant_id = v.tenant_id AND r.id = v.run_id
			WHERE v.run_id = $1 ORDER BY v.call_index`, approvalUUID(t, "Run", s.RunID))
		require.NoError(t, err)
		for rows.Next() {
			var x res
			require.NoError(t, rows.Scan(&x.call, &x.status, &x.when))
			got = append(got, x)
		}
		require.NoError(t, rows.Err())
	})
	require.Equal(t, []res{{0, "SETTLED", "with the lease"}, {1, "SETTLED", "after"}}, got,
		"the first call reserved with the lease, the second after it; both settled")
}

// budgetedWithOwnerSQL is a chat environment (with extra configuration) with a roomy tenant
// budget in which the database's owner ran stmts; the owner's connection stays open until the
// test ends.
func budgetedWithOwnerSQL(t *testing.T, extra map[string]string, stmts ...string) (*chatEnv, *pgx.Conn) {
	t.Helper()
	c := newChatEnvWith(t, "anthropic", extra)
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 10_000_000})
	ctx := context.Background()
	owner, err := pgx.Connect(ctx, c.OwnerURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = owner.Close(context.Background()) })
	for _, q := range stmts {
		_, err := owner.Exec(ctx, q)
		require.NoError(t, err)
	}
	return c, owner
}
