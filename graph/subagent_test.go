package graph_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// demoEnv is a chat environment whose conversations use the default model (the demo's), with
// autoExecute on so that spawn_subagent needs no approval.
func demoEnv(t *testing.T, o apptest.Options) *chatEnv {
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
func (c *chatEnv) subagents(t *testing.T) []subRow {
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
		mu                    sync.Mutex
		peakTenant, peakParent int
		samples               int
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

// TestSubagentFairness: tenant A queues 200 sub-agents, then tenant B queues 5; the dispatcher
// (called here pass by pass, each pass's starts then ended) starts B's first before A's 20th.
func TestSubagentFairness(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
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
	spawnUnder(c, 20, 10)
	spawnUnder(b, 1, 5)
	tenantOf := map[uuid.UUID]string{}
	for _, s := range c.subagents(t) {
		tenantOf[s.ID] = "A"
		if len(tenantOf) > 200 {
			tenantOf[s.ID] = "B"
		}
	}
	ctx := context.Background()
	svc := c.App.Subagents
	var order []string
	for passes := 0; passes < 100 && !slices.Contains(order, "B"); passes++ {
		_, err := svc.Dispatch(ctx)
		require.NoError(t, err)
		var started []subRow
		for _, s := range c.subagents(t) {
			if s.Status == "QUEUED" {
				started = append(started, s)
			}
		}
		slices.SortFunc(started, func(x, y subRow) int { return x.Dispatched.Compare(*y.Dispatched) })
		for _, s := range started {
			order = append(order, tenantOf[s.ID])
			// Its end frees its slot.
			require.NoError(t, c.App.Runs.CancelTree(ctx, tenantIDOf(t, c, s.ID), s.ID, "test: done"))
		}
	}
	first := slices.Index(order, "B")
	require.GreaterOrEqual(t, first, 0, "B never started: %v", order)
	t.Logf("start order: %s", strings.Join(order, ""))
	require.Less(t, strings.Count(strings.Join(order[:first], ""), "A"), 19, "B's first started after A's 20th")
}

// tenantIDOf is the tenant of sub-agent id.
func tenantIDOf(t *testing.T, c *chatEnv, id uuid.UUID) uuid.UUID {
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
		Run struct{ Subagents []struct{ Run struct{ ID string } } }
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
