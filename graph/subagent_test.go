package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// demoEnv is a chat environment whose conversations use the default model (the demo's), with
// autoExecute on so that spawn_subagent needs no approval.
func demoEnv(t testing.TB, o apptest.Options) *chatEnv {
	t.Helper()
	e := apptest.Start(t, o)
	c := &chatEnv{Env: e, s: e.SignUp(t, "", "")}
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 50})
	return c
}

// startWorker starts `agentry worker` sharing c's database, Redis namespace and keys; it is
// killed when t ends. The returned process may be SIGKILLed by the test.
func startWorker(t *testing.T, c *chatEnv, name string) *os.Process {
	t.Helper()
	apptest.Serial(t)
	bin := apptest.Binary(t)
	cmd := exec.Command(bin, "worker")
	cmd.Env = c.ProcessEnv(map[string]string{"AGENTRY_RETRY_BASE_DELAY": "50ms", "AGENTRY_SHUTDOWN_TIMEOUT": "2s"})
	out := &tpLog{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("worker %s output:\n%s", name, out.String())
		}
	})
	return cmd.Process
}

// subRow is a sub-agent as the table holds it.
type subRow struct {
	ID, Parent         uuid.UUID
	Status             string
	Priority           int
	Created            time.Time
	Dispatched         *time.Time
	Result, Error, Cls *string
}

// subagents reads every sub-agent of every tenant, oldest first.
func (c *chatEnv) subagents(t testing.TB) []subRow {
	t.Helper()
	var out []subRow
	c.ownerTx(t, func(tx pgx.Tx) {
		rows, err := tx.Query(context.Background(), `SELECT id, parent_run_id, status, priority, created_at, dispatched_at, result, error, failure_class FROM subagents ORDER BY id`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var r subRow
			require.NoError(t, rows.Scan(&r.ID, &r.Parent, &r.Status, &r.Priority, &r.Created, &r.Dispatched, &r.Result, &r.Error, &r.Cls))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
	})
	return out
}

// waitOutput is the answer of a wait_subagents call.
type waitOutput struct {
	Subagents []struct {
		ID, Role, Status string
		Result           *string
		Error            *string
	}
}

// TestSubagentDispatchLimits: 4 parents of one tenant spawn 10 sub-agents each, with mixed
// priorities, worked by 2 worker processes (the test's and `agentry worker`). Sampled every 10 ms,
// never more than 8 run in the tenant nor 5 under one parent; under each parent, sub-agents were
// dispatched in priority order then age; all 40 end COMPLETED and each parent's wait_subagents
// answers with its 10 results.
func TestSubagentDispatchLimits(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	startWorker(t, c, "second")
	const prios = "5,2,8,1,9,3,7,4,10,6"
	var runs []string
	for range 4 {
		conv := c.conversation(t, nil)
		s, res := c.send(t, conv, "spawn 10 sub-agents with priorities "+prios+": think for 300 ms then wait for sub-agents", nil)
		require.Empty(t, res.Errors, "%s", res.Body)
		runs = append(runs, s.RunID)
	}

	// The sampler: what runs, in the tenant and under each parent, every 10 ms.
	ctx, stop := context.WithCancel(context.Background())
	var (
		mu                     sync.Mutex
		peakTenant, peakParent int
		samples                int
	)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		conn, err := pgx.Connect(ctx, c.OwnerURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				continue
			}
			_, _ = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
			rows, err := tx.Query(ctx, `SELECT parent_run_id, count(*) FROM runs WHERE kind = 'SUBAGENT' AND status = 'RUNNING' GROUP BY parent_run_id`)
			if err == nil {
				total := 0
				mu.Lock()
				for rows.Next() {
					var p uuid.UUID
					var n int
					if rows.Scan(&p, &n) == nil {
						total += n
						peakParent = max(peakParent, n)
					}
				}
				peakTenant = max(peakTenant, total)
				samples++
				mu.Unlock()
				rows.Close()
			}
			_ = tx.Rollback(ctx)
		}
	}()
	for _, id := range runs {
		r := c.waitRun(t, id, 3*time.Minute)
		require.Equal(t, "COMPLETED", r.Status, "parent %s: %+v", id, r)
		var waits []waitOutput
		for _, tc := range r.ToolCalls {
			if tc.Name == "wait_subagents" && tc.Output != nil {
				var w waitOutput
				require.NoError(t, json.Unmarshal([]byte(*tc.Output), &w))
				waits = append(waits, w)
			}
		}
		require.Len(t, waits, 1, "one wait_subagents call of parent %s", id)
		require.Len(t, waits[0].Subagents, 10)
		for _, s := range waits[0].Subagents {
			require.Equal(t, "COMPLETED", s.Status)
			require.NotNil(t, s.Result)
			require.Contains(t, *s.Result, "Done.")
		}
	}
	stop()
	<-sampled
	mu.Lock()
	t.Logf("%d samples: at most %d running in the tenant, %d under one parent", samples, peakTenant, peakParent)
	require.LessOrEqual(t, peakTenant, 8)
	require.LessOrEqual(t, peakParent, 5)
	require.GreaterOrEqual(t, peakTenant, 2, "the sub-agents never ran side by side")
	mu.Unlock()

	subs := c.subagents(t)
	require.Len(t, subs, 40)
	byParent := map[uuid.UUID][]subRow{}
	for _, s := range subs {
		require.Equal(t, "COMPLETED", s.Status)
		require.NotNil(t, s.Dispatched)
		byParent[s.Parent] = append(byParent[s.Parent], s)
	}
	require.Len(t, byParent, 4)
	for p, kids := range byParent {
		// Every pair pending at once: the better one (priority, then age) was not dispatched later.
		for _, a := range kids {
			for _, b := range kids {
				better := a.Priority < b.Priority || (a.Priority == b.Priority && a.ID.String() < b.ID.String())
				if better && !a.Created.After(*b.Dispatched) {
					require.False(t, a.Dispatched.After(*b.Dispatched), "parent %s: priority %d dispatched after priority %d", p, a.Priority, b.Priority)
				}
			}
		}
	}
}

// TestSubagentFairness: on a platform of 8 slots, tenant A queues 200 sub-agents, then tenant B
// queues 5; the dispatcher (called here pass by pass, each pass's starts then ended) starts B's
// first before A's 20th (first come, first served would start it after A's 200th).
func TestSubagentFairness(t *testing.T) {
	t.Parallel()
	// The platform has 8 slots: the tenants compete for them.
	c := demoEnv(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_SUBAGENTS_PLATFORM_MAX": "8"}})
	b := &chatEnv{Env: c.Env, s: c.SignUp(t, "", "")}
	spawnUnder := func(c *chatEnv, parents, each int) {
		for range parents {
			s, res := c.send(t, c.conversation(t, nil), "hello", nil) // QUEUED: nobody works it
			require.Empty(t, res.Errors, "%s", res.Body)
			for range each {
				res := c.Do(t, c.s.AccessToken, `mutation($in: SpawnSubagentInput!) { spawnSubagent(input: $in) { id status } }`,
					map[string]any{"in": map[string]any{"parentRunId": s.RunID, "role": "GENERAL", "goal": "think for 10 ms"}})
				require.Empty(t, res.Errors, "%s", res.Body)
			}
		}
	}
	ctx := context.Background()
	svc := c.App.Subagents
	// One pass: what it starts ends at once (its slots are free for the next pass). It returns
	// how many of each tenant's it started.
	started := map[uuid.UUID]bool{}
	var tenantA uuid.UUID
	pass := func() (a, b int) {
		_, err := svc.Dispatch(ctx)
		require.NoError(t, err)
		for _, s := range c.subagents(t) {
			if s.Status != "QUEUED" || started[s.ID] {
				continue
			}
			started[s.ID] = true
			if tenantIDOf(t, c, s.ID) == tenantA {
				a++
			} else {
				b++
			}
			require.NoError(t, c.App.Runs.CancelTree(ctx, tenantIDOf(t, c, s.ID), s.ID, "test: done"))
		}
		return a, b
	}
	spawnUnder(c, 20, 10) // A queues 200
	tenantA = tenantIDOf(t, c, c.subagents(t)[0].ID)
	aStarted, _ := pass() // the dispatcher is at work on A's
	spawnUnder(b, 1, 5)   // then B queues 5
	var log []string
	for range 30 {
		a, bn := pass()
		log = append(log, fmt.Sprintf("A%d B%d", a, bn))
		if bn > 0 {
			// B's first started in this pass, with at most a of A's: it started before A's 20th.
			require.Less(t, aStarted+a, 20, "B's first started with A's %d (passes: %v)", aStarted+a, log)
			t.Logf("passes after B queued: %v (A had %d started before)", log, aStarted)
			return
		}
		aStarted += a
	}
	t.Fatalf("B never started: %v", log)
}

// tenantIDOf is the tenant of sub-agent id.
func tenantIDOf(t testing.TB, c *chatEnv, id uuid.UUID) uuid.UUID {
	var tid uuid.UUID
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT tenant_id FROM subagents WHERE id = $1`, id).Scan(&tid))
	})
	return tid
}

const spawnMutation = `mutation($in: SpawnSubagentInput!) { spawnSubagent(input: $in) { id status depth tools run { id } parent { id } } }`

type spawned struct {
	ID, Status string
	Depth      int
	Tools      []string
	Run        struct{ ID string }
	Parent     struct{ ID string }
}

func (c *chatEnv) spawn(t *testing.T, token string, in map[string]any) (spawned, *apptest.Response) {
	t.Helper()
	res := c.Do(t, token, spawnMutation, map[string]any{"in": in})
	var out struct{ SpawnSubagent spawned }
	if len(res.Errors) == 0 {
		res.Decode(t, &out)
	}
	return out.SpawnSubagent, res
}

// TestSubagentDepthLimitsAndTools: depth 3 is allowed and a fourth level refused; limits out of
// range are refused, naming the field; a sub-agent under a read-only one gets no write tool; no
// sub-agent gets a memory-writing tool.
func TestSubagentDepthLimitsAndTools(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
	top, res := c.send(t, c.conversation(t, nil), "hello", nil)
	require.Empty(t, res.Errors)
	parent := top.RunID
	for depth := 1; depth <= 3; depth++ {
		role := "GENERAL"
		if depth == 2 {
			role = "RESEARCHER"
		}
		if depth == 3 {
			role = "CODER"
		}
		s, res := c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": parent, "role": role, "goal": "go on", "maxTokens": 10_000})
		require.Empty(t, res.Errors, "%s", res.Body)
		require.Equal(t, depth, s.Depth)
		require.Equal(t, "PENDING", s.Status)
		require.Equal(t, parent, s.Parent.ID)
		require.NotContains(t, s.Tools, "remember")
		switch depth {
		case 1:
			require.Contains(t, s.Tools, "write_file")
			require.Contains(t, s.Tools, "spawn_subagent")
		case 2:
			require.NotContains(t, s.Tools, "write_file")
			require.Contains(t, s.Tools, "read_file")
		case 3:
			// A coder under a researcher: only what the researcher has.
			require.NotContains(t, s.Tools, "write_file")
			require.NotContains(t, s.Tools, "edit_file")
			require.NotContains(t, s.Tools, "delete_file")
			require.Contains(t, s.Tools, "read_file")
		}
		parent = s.Run.ID
	}
	_, res = c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": parent, "role": "GENERAL", "goal": "too deep", "maxTokens": 1000})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	require.Contains(t, res.Errors[0].Message, "at most 3 deep")

	for _, bad := range []map[string]any{
		{"priority": 0}, {"priority": 11}, {"maxTurns": 0}, {"maxTurns": 101}, {"maxTokens": 999}, {"maxTokens": 1_000_001},
		{"timeoutMinutes": 0}, {"timeoutMinutes": 241}, {"goal": "  "}, {"goal": strings.Repeat("x", 20_001)},
	} {
		in := map[string]any{"parentRunId": top.RunID, "role": "GENERAL", "goal": "fine"}
		for k, v := range bad {
			in[k] = v
		}
		_, res := c.spawn(t, c.s.AccessToken, in)
		require.Equal(t, "BAD_USER_INPUT", res.Code(), "%v: %s", bad, res.Body)
	}
	// A child's maxTokens comes out of its parent's: the depth-1 sub-agent has 10,000.
	var first struct {
		Run struct {
			Subagents []struct{ Run struct{ ID string } }
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { subagents { run { id } } } }`, map[string]any{"id": top.RunID}).Decode(t, &first)
	require.Len(t, first.Run.Subagents, 1)
	_, res = c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": first.Run.Subagents[0].Run.ID, "role": "GENERAL", "goal": "too big", "maxTokens": 5_000})
	require.Equal(t, "BUDGET_EXCEEDED", res.Code(), "%s", res.Body)
}

// TestSubagentIsolation: another tenant can neither see, spawn under, nor cancel a tenant's
// sub-agents: each answer is NOT_FOUND (null from node), as for a missing id.
func TestSubagentIsolation(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
	top, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	s, res := c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": top.RunID, "role": "GENERAL", "goal": "mine"})
	require.Empty(t, res.Errors, "%s", res.Body)
	other := c.SignUp(t, "", "")

	var node struct{ Node *struct{ ID string } }
	c.Do(t, other.AccessToken, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": s.ID}).Decode(t, &node)
	require.Nil(t, node.Node)
	var own struct{ Node *struct{ ID string } }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { node(id: $id) { id ... on Subagent { status } } }`, map[string]any{"id": s.ID}).Decode(t, &own)
	require.NotNil(t, own.Node)

	_, res = c.spawn(t, other.AccessToken, map[string]any{"parentRunId": top.RunID, "role": "GENERAL", "goal": "theirs"})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	res = c.Do(t, other.AccessToken, `mutation($id: ID!) { cancelSubagent(id: $id) { id } }`, map[string]any{"id": s.ID})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	res = c.Do(t, other.AccessToken, `query($id: ID!) { run(id: $id) { id subagents { id } } }`, map[string]any{"id": top.RunID})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)

	// Still there, untouched; its owner cancels it.
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelSubagent(id: $id) { id status } }`, map[string]any{"id": s.ID})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Contains(t, string(res.Body), `"CANCELLED"`)
}

// descendantsOf returns the runs under run (global id) as (id, status), every level.
func (c *chatEnv) descendantsOf(t *testing.T, runID string) map[uuid.UUID]string {
	t.Helper()
	out := map[uuid.UUID]string{}
	c.ownerTx(t, func(tx pgx.Tx) {
		rows, err := tx.Query(context.Background(), `WITH RECURSIVE tree AS (
			SELECT id, status FROM runs WHERE parent_run_id = $1
			UNION ALL SELECT r.id, r.status FROM runs r JOIN tree ON r.parent_run_id = tree.id)
			SELECT id, status FROM tree`, approvalUUID(t, "Run", runID))
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			var st string
			require.NoError(t, rows.Scan(&id, &st))
			out[id] = st
		}
	})
	return out
}

// TestSubagentCancelCascades: a parent with 3 sub-agents, each waiting for 2 of its own that are
// in a model call, is cancelled: every descendant ends CANCELLED and none of them calls the
// model again.
func TestSubagentCancelCascades(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	s, res := c.send(t, c.conversation(t, nil), "spawn 3 sub-agents: spawn 2 sub-agents: think for 30000 ms; wait for sub-agents then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	assert.Eventually(t, func() bool {
		running := 0
		for _, st := range c.descendantsOf(t, s.RunID) {
			if st == "RUNNING" {
				running++
			}
		}
		return running == 6 // the 6 grandchildren; their 3 parents wait (their slots given back)
	}, 20*time.Second, 20*time.Millisecond, "descendants never all running")
	if t.Failed() {
		t.Logf("parent: %+v; descendants: %v", c.run(t, s.RunID), c.descendantsOf(t, s.RunID))
		c.ownerTx(t, func(tx pgx.Tx) {
			rows, _ := tx.Query(context.Background(), `SELECT m.role, m.content FROM messages m JOIN runs r ON r.id = m.run_id WHERE r.kind = 'SUBAGENT' ORDER BY m.id LIMIT 6`)
			for rows.Next() {
				var a, b string
				_ = rows.Scan(&a, &b)
				t.Logf("%s: %q", a, b)
			}
			rows.Close()
		})
	}
	require.Equal(t, "WAITING", c.run(t, s.RunID).Status)
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": s.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "CANCELLED", c.waitRun(t, s.RunID, 10*time.Second).Status)
	require.Eventually(t, func() bool {
		d := c.descendantsOf(t, s.RunID)
		for _, st := range d {
			if st != "CANCELLED" {
				return false
			}
		}
		return len(d) == 9
	}, 10*time.Second, 20*time.Millisecond)
	// No model call started after the cancel: a sub-agent made two (spawn, wait), a grandchild
	// one (think); the calls the cancel cut keep their partial replies and are metered.
	parent := approvalUUID(t, "Run", s.RunID)
	again := c.count(t, `SELECT (SELECT count(*) FROM usage_records u JOIN runs r ON r.id = u.run_id
			WHERE (r.parent_run_id = $1 AND u.call_index > 1)
			   OR (r.parent_run_id IN (SELECT id FROM runs WHERE parent_run_id = $1) AND u.call_index > 0))
		+ (SELECT count(*) FROM messages m JOIN runs r ON r.id = m.run_id
			WHERE m.role = 'ASSISTANT' AND ((r.parent_run_id = $1 AND m.llm_call_index > 1)
			   OR (r.parent_run_id IN (SELECT id FROM runs WHERE parent_run_id = $1) AND m.llm_call_index > 0)))`, parent)
	require.Zero(t, again, "a sub-agent called the model after the cancel")
	for _, sa := range c.subagents(t) {
		require.Equal(t, "CANCELLED", sa.Status)
	}
}

// TestSubagentSiblingsEndTogether: 3 parents, each with 10 sub-agents that reply at the same
// moment, the reply ending each run. A sub-agent's end updates its run row twice (its usage,
// then its status), which takes a share lock on its parent's row (the foreign-key check), then
// locks the parent to report to it: siblings doing so at once must not deadlock. A deadlock
// aborts one side, whose attempt is retried: no run may have been retried, and every one
// completes.
func TestSubagentSiblingsEndTogether(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	var ids []string
	for range 3 {
		s, res := c.send(t, c.conversation(t, nil), "spawn 10 sub-agents: think for 10 ms then wait for sub-agents", nil)
		require.Empty(t, res.Errors, "%s", res.Body)
		ids = append(ids, s.RunID)
	}
	for _, id := range ids {
		r := c.waitRun(t, id, 2*time.Minute)
		require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	}
	require.Zero(t, c.count(t, `SELECT count(*) FROM run_events WHERE type = 'task.retrying'`), "an attempt was retried (a deadlock aborted it)")
	require.Equal(t, 30, c.count(t, `SELECT count(*) FROM subagents WHERE status = 'COMPLETED'`))
}

// TestSubagentLimitsEndRuns: a sub-agent past its timeout ends TIMED_OUT and one past its max
// tokens ends FAILED (budget_exceeded), each with its reason; the parent's wait_subagents reports
// both, and their slots are free.
func TestSubagentLimitsEndRuns(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	// Two minutes have passed for the executor's time limits: a 1-minute sub-agent is over time.
	c.App.Executor.SetClock(func() time.Time { return time.Now().Add(2 * time.Minute) })
	s, res := c.send(t, c.conversation(t, nil), "spawn a sub-agent with timeout 1: think for 10 ms then "+
		"spawn a sub-agent with max tokens 1000: list files; list files; list files; list files; list files; list files; list files; list files then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	r := c.waitRun(t, s.RunID, time.Minute)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	var w waitOutput
	for _, tc := range r.ToolCalls {
		if tc.Name == "wait_subagents" {
			require.NotNil(t, tc.Output)
			require.NoError(t, json.Unmarshal([]byte(*tc.Output), &w))
		}
	}
	require.Len(t, w.Subagents, 2)
	statuses := map[string]string{}
	for _, sa := range w.Subagents {
		require.NotNil(t, sa.Error, "%+v", sa)
		statuses[sa.Status] = *sa.Error
	}
	require.Contains(t, statuses["TIMED_OUT"], "timed out")
	require.Contains(t, statuses["FAILED"], "max tokens used up")
	require.Zero(t, c.count(t, `SELECT count(*) FROM subagents WHERE status IN ('QUEUED', 'RUNNING')`))
}

// TestSubagentBudgetAndUsage: 50 sub-agents race for a tenant token budget that fits about 12
// model calls. Sampled every 10 ms, spent + reserved never exceeds the limit; each sub-agent
// completes or fails with budget_exceeded; no reservation is left; the parent's totals are the
// sum of its own and its descendants' usage records. The sub-agents wait for approval until
// the parent waits for them: otherwise they could use the budget up before the parent's
// wait_subagents call, which fails the parent and cancels them (a fair outcome, not this test's).
func TestSubagentBudgetAndUsage(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	c.settings(t, map[string]any{"maxTokensPerTask": 1024, "subagentApproval": "REQUIRED"})
	bud := c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 10_000_000})
	worst, _ := c.probeReservation(t, c.conversation(t, nil))
	spent, _, _ := c.budgetRow(t, bud.ID)
	limit := spent + 12*worst + worst/2
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": limit})

	ctx, stop := context.WithCancel(context.Background())
	var over int64 = -1
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s, r, l := c.budgetRow(t, bud.ID)
			if s+r > l {
				over = s + r
			}
		}
	}()
	s, res := c.send(t, c.conversation(t, nil), "spawn 50 sub-agents: think for 10 ms then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "WAITING" }, time.Minute, 20*time.Millisecond)
	var pending struct {
		Approvals struct {
			Edges []struct{ Node subagentApproval }
		}
	}
	c.Do(t, c.s.AccessToken, `{ approvals(status: PENDING, first: 100) { edges { node { id kind status run { id } } } } }`, nil).Decode(t, &pending)
	require.Len(t, pending.Approvals.Edges, 50)
	for _, e := range pending.Approvals.Edges {
		res := c.Do(t, c.s.AccessToken, resolveMutation, map[string]any{"id": e.Node.ID, "d": "APPROVE"})
		require.Empty(t, res.Errors, "%s", res.Body)
	}
	r := c.waitRun(t, s.RunID, 2*time.Minute)
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM subagents WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`) == 0
	}, time.Minute, 20*time.Millisecond)
	stop()
	<-sampled
	require.Equal(t, int64(-1), over, "spent + reserved went over the limit %d", limit)
	s2, reserved, _ := c.budgetRow(t, bud.ID)
	require.Zero(t, reserved)
	require.LessOrEqual(t, s2, limit)
	subs := c.subagents(t)
	require.Len(t, subs, 50)
	completed, refused := 0, 0
	for _, sa := range subs {
		switch sa.Status {
		case "COMPLETED":
			completed++
		case "FAILED":
			require.NotNil(t, sa.Error)
			require.Contains(t, strings.ToLower(*sa.Error), "budget", "%s", *sa.Error)
			refused++
		default:
			t.Fatalf("sub-agent %s ended %s", sa.ID, sa.Status)
		}
	}
	t.Logf("parent %s; %d sub-agents completed, %d refused by the budget", r.Status, completed, refused)
	require.Positive(t, completed)
	require.Positive(t, refused)

	var tot struct {
		Run struct{ TotalInputTokens, TotalOutputTokens, TotalCostMicros, InputTokens int64 }
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { totalInputTokens totalOutputTokens totalCostMicros inputTokens } }`,
		map[string]any{"id": s.RunID}).Decode(t, &tot)
	var in, out, cost int64
	c.ownerTx(t, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), `SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), coalesce(sum(cost_micros), 0)
			FROM usage_records WHERE run_id = $1 OR run_id IN (SELECT id FROM runs WHERE parent_run_id = $1)`, approvalUUID(t, "Run", s.RunID)).Scan(&in, &out, &cost))
	})
	require.Equal(t, in, tot.Run.TotalInputTokens)
	require.Equal(t, out, tot.Run.TotalOutputTokens)
	require.Equal(t, cost, tot.Run.TotalCostMicros)
	require.Greater(t, tot.Run.TotalInputTokens, tot.Run.InputTokens, "the children's usage is rolled up")
}

// TestSubagentWorkerSIGKILL: the only worker process, running 5 sub-agents in model calls, is
// SIGKILLed; another takes over: every sub-agent resumes and completes, and their slots are
// free within 30 s of the kill; the parent gets every result.
func TestSubagentWorkerSIGKILL(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
	w1 := startWorker(t, c, "first")
	s, res := c.send(t, c.conversation(t, nil), "spawn 5 sub-agents: think for 1200 ms then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM runs WHERE kind = 'SUBAGENT' AND status = 'RUNNING'`) == 5
	}, time.Minute, 10*time.Millisecond)
	require.NoError(t, w1.Signal(syscall.SIGKILL))
	killed := time.Now()
	startWorker(t, c, "second")
	require.Eventually(t, func() bool {
		return c.count(t, `SELECT count(*) FROM subagents WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`) == 0
	}, 30*time.Second, 20*time.Millisecond, "slots still held 30 s after the kill")
	t.Logf("every sub-agent ended %s after the kill", time.Since(killed).Round(time.Millisecond))
	for _, sa := range c.subagents(t) {
		require.Equal(t, "COMPLETED", sa.Status)
	}
	r := c.waitRun(t, s.RunID, 30*time.Second)
	require.Equal(t, "COMPLETED", r.Status)
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs WHERE status IN ('RUNNING', 'QUEUED', 'WAITING')`))
}

// TestSubagentFourthLevelIsAToolError: a sub-agent at depth 3 whose model calls spawn_subagent
// gets a tool error saying why (the model reads it and answers), and no fourth level exists.
func TestSubagentFourthLevelIsAToolError(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	top, res := c.send(t, c.conversation(t, nil), "think for 30000 ms", nil) // a run that goes on
	require.Empty(t, res.Errors, "%s", res.Body)
	parent := top.RunID
	var deepest spawned
	for depth := 1; depth <= 3; depth++ {
		goal := "think for 30000 ms"
		if depth == 3 {
			goal = "spawn a sub-agent: think for 10 ms"
		}
		s, res := c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": parent, "role": "GENERAL", "goal": goal, "maxTokens": 20_000})
		require.Empty(t, res.Errors, "%s", res.Body)
		parent, deepest = s.Run.ID, s
	}
	r := c.waitRun(t, deepest.Run.ID, time.Minute)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.Len(t, r.ToolCalls, 1)
	require.Equal(t, "spawn_subagent", r.ToolCalls[0].Name)
	require.Equal(t, "FAILED", r.ToolCalls[0].Status)
	require.NotNil(t, r.ToolCalls[0].Error)
	require.Contains(t, *r.ToolCalls[0].Error, "nest at most 3 deep")
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs WHERE depth > 3`))
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": top.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
}
