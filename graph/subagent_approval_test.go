package graph_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/app/apptest"
)

// subagentApproval is the pending approval of a sub-agent's start, as the inbox lists it.
type subagentApproval struct {
	ID, Kind, Status string
	Run              struct{ ID string }
}

// pendingSubagentApprovals lists the caller's pending approvals of kind subagent.
func (c *chatEnv) pendingSubagentApprovals(t *testing.T) []subagentApproval {
	t.Helper()
	var out struct {
		Approvals struct {
			Edges []struct{ Node subagentApproval }
		}
	}
	c.Do(t, c.s.AccessToken, `{ approvals(status: PENDING) { edges { node { id kind status run { id } } } } }`, nil).Decode(t, &out)
	var aps []subagentApproval
	for _, e := range out.Approvals.Edges {
		if e.Node.Kind == "subagent" {
			aps = append(aps, e.Node)
		}
	}
	return aps
}

// subagentsOf is run's sub-agents (id, status, error) through the API.
func (c *chatEnv) subagentsOf(t *testing.T, runID string) []struct {
	ID, Status string
	Error      *string
} {
	t.Helper()
	var out struct {
		Run struct {
			Subagents []struct {
				ID, Status string
				Error      *string
			}
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { subagents { id status error } } }`, map[string]any{"id": runID}).Decode(t, &out)
	return out.Run.Subagents
}

const resolveMutation = `mutation($id: ID!, $d: ApprovalDecision!, $n: String) { resolveApproval(id: $id, decision: $d, note: $n) { id status } }`

// waitAnswer is the output of the last wait_subagents call of run r.
func waitAnswer(t *testing.T, r runView) waitOutput {
	t.Helper()
	var w waitOutput
	found := false
	for _, tc := range r.ToolCalls {
		if tc.Name == "wait_subagents" && tc.Output != nil {
			require.NoError(t, json.Unmarshal([]byte(*tc.Output), &w))
			found = true
		}
	}
	require.True(t, found, "no wait_subagents answer: %+v", r)
	return w
}

// TestSubagentApprovalRequired: with subagentApproval REQUIRED a spawned sub-agent is
// AWAITING_APPROVAL (subagent.awaiting_approval on the parent's stream, an approval of kind
// subagent in the inbox) and does not start; another tenant and a colleague cannot decide it;
// its user approves and it runs to COMPLETED, the parent's wait_subagents getting its result.
func TestSubagentApprovalRequired(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	var set struct {
		UpdateAgentSettings struct{ SubagentApproval string }
	}
	c.Do(t, c.s.AccessToken, `mutation { updateAgentSettings(input: {subagentApproval: REQUIRED}) { subagentApproval } }`, nil).Decode(t, &set)
	require.Equal(t, "REQUIRED", set.UpdateAgentSettings.SubagentApproval)

	s, res := c.send(t, c.conversation(t, nil), "spawn a sub-agent: think for 10 ms then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	var aps []subagentApproval
	require.Eventually(t, func() bool { aps = c.pendingSubagentApprovals(t); return len(aps) == 1 }, 20*time.Second, 20*time.Millisecond,
		"run %+v, sub-agents %+v", c.run(t, s.RunID), c.subagentsOf(t, s.RunID))
	subs := c.subagentsOf(t, s.RunID)
	require.Len(t, subs, 1)
	require.Equal(t, "AWAITING_APPROVAL", subs[0].Status)
	require.Equal(t, approvalUUID(t, "Subagent", subs[0].ID), approvalUUID(t, "Run", aps[0].Run.ID), "the approval is asked on the sub-agent's own run")
	// The parent waits for it (no worker held); nothing starts it meanwhile.
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "WAITING" }, 20*time.Second, 20*time.Millisecond)
	_, err := c.App.Subagents.Dispatch(context.Background())
	require.NoError(t, err)
	require.Equal(t, "AWAITING_APPROVAL", c.subagentsOf(t, s.RunID)[0].Status)
	var awaiting map[string]any
	for _, e := range c.eventsOf(t, s.RunID) {
		if e.Type == "subagent.awaiting_approval" {
			require.NoError(t, json.Unmarshal(e.Data, &awaiting))
		}
	}
	require.NotNil(t, awaiting, "no subagent.awaiting_approval on the parent's stream")
	require.Equal(t, aps[0].ID, awaiting["approvalId"])
	require.Equal(t, subs[0].ID, awaiting["subagentId"])
	require.Equal(t, "GENERAL", awaiting["role"])

	// The attacks: another tenant's owner, and a colleague in the same tenant.
	other := c.SignUp(t, "", "")
	res = c.Do(t, other.AccessToken, resolveMutation, map[string]any{"id": aps[0].ID, "d": "APPROVE"})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	colleague := memJoin(t, c.Env, c.s.AccessToken, c.SignUp(t, "", ""), c.s.TenantID, "MEMBER")
	res = c.Do(t, colleague.AccessToken, resolveMutation, map[string]any{"id": aps[0].ID, "d": "APPROVE"})
	require.Contains(t, []string{"NOT_FOUND", "FORBIDDEN"}, res.Code(), "%s", res.Body)
	require.Equal(t, "AWAITING_APPROVAL", c.subagentsOf(t, s.RunID)[0].Status, "an attack decided the approval")

	res = c.Do(t, c.s.AccessToken, resolveMutation, map[string]any{"id": aps[0].ID, "d": "APPROVE"})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Contains(t, string(res.Body), `"APPROVED"`)
	r := c.waitRun(t, s.RunID, time.Minute)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	w := waitAnswer(t, r)
	require.Len(t, w.Subagents, 1)
	require.Equal(t, "COMPLETED", w.Subagents[0].Status)
	require.NotNil(t, w.Subagents[0].Result)
	var types []string
	for _, e := range c.eventsOf(t, s.RunID) {
		if len(e.Type) > 9 && e.Type[:9] == "subagent." {
			types = append(types, e.Type)
		}
	}
	require.Equal(t, []string{"subagent.spawned", "subagent.awaiting_approval", "subagent.started", "subagent.completed"}, types)
	// A decided approval stays decided.
	res = c.Do(t, c.s.AccessToken, resolveMutation, map[string]any{"id": aps[0].ID, "d": "REJECT"})
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
}

// TestSubagentApprovalRejectedAndExpired: a rejected start ends the sub-agent CANCELLED with
// the reason (and the note), which the waiting parent's wait_subagents reports; an approval
// nobody answers expires like any other and cancels its sub-agent too.
func TestSubagentApprovalRejectedAndExpired(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	c.settings(t, map[string]any{"subagentApproval": "REQUIRED"})

	s, res := c.send(t, c.conversation(t, nil), "spawn a sub-agent: think for 10 ms then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	var aps []subagentApproval
	require.Eventually(t, func() bool { aps = c.pendingSubagentApprovals(t); return len(aps) == 1 }, 20*time.Second, 20*time.Millisecond)
	res = c.Do(t, c.s.AccessToken, resolveMutation, map[string]any{"id": aps[0].ID, "d": "REJECT", "n": "not now"})
	require.Empty(t, res.Errors, "%s", res.Body)
	r := c.waitRun(t, s.RunID, time.Minute)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	w := waitAnswer(t, r)
	require.Len(t, w.Subagents, 1)
	require.Equal(t, "CANCELLED", w.Subagents[0].Status)
	require.NotNil(t, w.Subagents[0].Error)
	require.Contains(t, *w.Subagents[0].Error, "rejected: not now")
	require.Zero(t, c.count(t, `SELECT count(*) FROM usage_records WHERE run_id = $1`, approvalUUID(t, "Subagent", c.subagentsOf(t, s.RunID)[0].ID)), "a rejected sub-agent ran")

	// Expiry: a sub-agent spawned through the API under a run that goes on.
	top, res := c.send(t, c.conversation(t, nil), "think for 30000 ms", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	sp, res := c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": top.RunID, "role": "GENERAL", "goal": "think for 10 ms"})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "AWAITING_APPROVAL", sp.Status)
	c.App.Approvals.SetClock(func() time.Time { return time.Now().Add(c.App.Approvals.TTL() + time.Minute) })
	n, err := c.App.Approvals.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var got struct {
		Node struct {
			Status string
			Error  *string
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { node(id: $id) { ... on Subagent { status error } } }`, map[string]any{"id": sp.ID}).Decode(t, &got)
	require.Equal(t, "CANCELLED", got.Node.Status)
	require.NotNil(t, got.Node.Error)
	require.Contains(t, *got.Node.Error, "expired")
	var ended bool
	for _, e := range c.eventsOf(t, top.RunID) {
		ended = ended || e.Type == "subagent.cancelled"
	}
	require.True(t, ended, "the parent was not told")
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": top.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
}

// platformAdmin makes c's user a platform admin and returns a fresh token that says so.
func (c *chatEnv) platformAdmin(t *testing.T) string {
	t.Helper()
	_, err := c.App.Tenancy.GrantPlatformAdmin(context.Background(), c.s.Email, true)
	require.NoError(t, err)
	return c.logIn(t, c.s.Email, c.s.Password, c.s.TenantID)
}

// onPlan puts c's tenant on a new plan allowing max running sub-agents (as a platform admin),
// after checking that nobody else may.
func (c *chatEnv) onPlan(t *testing.T, name string, max int) {
	t.Helper()
	const setPlan = `mutation($in: SetPlanInput!) { setPlan(input: $in) { name subagentsRunningMax } }`
	const setTenantPlan = `mutation($t: ID!, $p: String!) { setTenantPlan(tenantId: $t, plan: $p) { id plan } }`
	in := map[string]any{"in": map[string]any{"name": name, "subagentsRunningMax": max}}
	require.Equal(t, "FORBIDDEN", c.Do(t, c.s.AccessToken, setPlan, in).Code())
	require.Equal(t, "FORBIDDEN", c.Do(t, c.s.AccessToken, setTenantPlan, map[string]any{"t": c.s.TenantID, "p": "free"}).Code())
	admin := c.platformAdmin(t)
	require.Equal(t, "BAD_USER_INPUT", c.Do(t, admin, setPlan, map[string]any{"in": map[string]any{"name": name, "subagentsRunningMax": 0}}).Code())
	require.Equal(t, "BAD_USER_INPUT", c.Do(t, admin, setPlan, map[string]any{"in": map[string]any{"name": "Bad Name", "subagentsRunningMax": 3}}).Code())
	res := c.Do(t, admin, setPlan, in)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "BAD_USER_INPUT", c.Do(t, admin, setTenantPlan, map[string]any{"t": c.s.TenantID, "p": "nope"}).Code())
	var out struct{ SetTenantPlan struct{ Plan string } }
	c.Do(t, admin, setTenantPlan, map[string]any{"t": c.s.TenantID, "p": name}).Decode(t, &out)
	require.Equal(t, name, out.SetTenantPlan.Plan)
	var v struct {
		Viewer struct{ Tenant struct{ Plan string } }
	}
	c.Do(t, c.s.AccessToken, `{ viewer { tenant { plan } } }`, nil).Decode(t, &v)
	require.Equal(t, name, v.Viewer.Tenant.Plan)
}

// TestSubagentPlanLimit: a tenant on a plan allowing 3 running sub-agents, whose run spawns 8
// (one parent: its own limit of 5 does not bind), never has more than 3 holding a slot (queued
// for a worker or running), sampled every 10 ms; all 8 complete.
func TestSubagentPlanLimit(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	c.onPlan(t, "small-"+uuid.NewString()[:8], 3)
	s, res := c.send(t, c.conversation(t, nil), "spawn 8 sub-agents with priorities 1,2,3,4,5,6,7,8: think for 200 ms then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)

	ctx, stop := context.WithCancel(context.Background())
	var (
		mu             sync.Mutex
		peak, peakSlot int
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
			var running, slots int
			if tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE r.status = 'RUNNING'), count(*) FILTER (WHERE s.status IN ('QUEUED', 'RUNNING'))
				FROM subagents s JOIN runs r ON r.id = s.id`).Scan(&running, &slots) == nil {
				mu.Lock()
				peak, peakSlot = max(peak, running), max(peakSlot, slots)
				mu.Unlock()
			}
			_ = tx.Rollback(ctx)
		}
	}()
	r := c.waitRun(t, s.RunID, 2*time.Minute)
	stop()
	<-sampled
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	w := waitAnswer(t, r)
	require.Len(t, w.Subagents, 8)
	for _, sa := range w.Subagents {
		require.Equal(t, "COMPLETED", sa.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("at most %d running, %d holding a slot", peak, peakSlot)
	require.LessOrEqual(t, peak, 3)
	require.LessOrEqual(t, peakSlot, 3)
	require.GreaterOrEqual(t, peak, 2, "the sub-agents never ran side by side")
}

// TestSubagentResumedParentWaitsForSlot: on a plan allowing 2, sub-agent A spawns B and C and
// waits for them at most 1 s. Its wait gives A's slot to B and C; when the wait times out, A is
// PENDING again and stays so (a dispatcher pass does not start it) while B and C hold the 2
// slots. Cancelling B frees one: A gets it, resumes and completes; subagent.started is said
// once for it.
func TestSubagentResumedParentWaitsForSlot(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{})
	c.onPlan(t, "two-"+uuid.NewString()[:8], 2)
	s, res := c.send(t, c.conversation(t, nil), "spawn a sub-agent: spawn 2 sub-agents: think for 30000 ms; wait for sub-agents for 1 second then wait for sub-agents", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	var a struct {
		ID, Status string
		Error      *string
	}
	var children []struct {
		ID, Status string
		Error      *string
	}
	require.Eventually(t, func() bool {
		subs := c.subagentsOf(t, s.RunID)
		if len(subs) != 1 {
			return false
		}
		a = subs[0]
		children = c.subagentsOf(t, globalRunID(approvalUUID(t, "Subagent", a.ID)))
		return a.Status == "PENDING" && len(children) == 2 && children[0].Status == "RUNNING" && children[1].Status == "RUNNING"
	}, 30*time.Second, 20*time.Millisecond, "A never went back to the dispatcher: %+v %+v", a, children)
	aRun := approvalUUID(t, "Subagent", a.ID)
	ctx := context.Background()
	_, err := c.App.Subagents.Dispatch(ctx)
	require.NoError(t, err)
	children = c.subagentsOf(t, globalRunID(aRun))
	require.Len(t, children, 2)
	for _, ch := range children {
		require.Equal(t, "RUNNING", ch.Status)
	}
	require.Equal(t, "PENDING", c.subagentsOf(t, s.RunID)[0].Status, "A started over the tenant's limit")
	require.Equal(t, "QUEUED", c.run(t, globalRunID(aRun)).Status)

	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelSubagent(id: $id) { status } }`, map[string]any{"id": children[0].ID})
	require.Empty(t, res.Errors, "%s", res.Body)
	r := c.waitRun(t, s.RunID, time.Minute)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	ar := c.waitRun(t, globalRunID(aRun), time.Minute)
	require.Equal(t, "COMPLETED", ar.Status, "%v", deref(ar.Error))
	started := 0
	for _, e := range c.eventsOf(t, s.RunID) {
		if e.Type == "subagent.started" {
			started++
		}
	}
	require.Equal(t, 1, started)
}

// globalRunID is the Run global id of a run's uuid.
func globalRunID(id uuid.UUID) string { return model.EncodeID("Run", id) }

// TestSubagentConversationGoesWithParent: deleting the conversation of a run with sub-agents
// (two levels) deletes the sub-agents' own conversations, runs and messages with it.
func TestSubagentConversationGoesWithParent(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
	conv := c.conversation(t, nil)
	top, res := c.send(t, conv, "hello", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	first, res := c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": top.RunID, "role": "GENERAL", "goal": "one", "maxTokens": 10_000})
	require.Empty(t, res.Errors, "%s", res.Body)
	_, res = c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": first.Run.ID, "role": "GENERAL", "goal": "two", "maxTokens": 2_000})
	require.Empty(t, res.Errors, "%s", res.Body)
	tenant := c.s.TenantID
	tid := approvalUUID(t, "Tenant", tenant)
	require.Equal(t, 3, c.count(t, `SELECT count(*) FROM conversations WHERE tenant_id = $1`, tid))
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": top.RunID})
	require.Empty(t, res.Errors, "%s", res.Body)
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { deleteConversation(id: $id) }`, map[string]any{"id": conv})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE tenant_id = $1`, tid), "sub-agent conversations left behind")
	require.Zero(t, c.count(t, `SELECT count(*) FROM messages WHERE tenant_id = $1`, tid))
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs WHERE tenant_id = $1`, tid))
}

// TestSubagentDispatchRequestsCollapse: five spawns while no worker runs leave one dispatcher
// pass waiting, not five (River's unique jobs).
func TestSubagentDispatchRequestsCollapse(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
	top, res := c.send(t, c.conversation(t, nil), "hello", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	for range 5 {
		_, res := c.spawn(t, c.s.AccessToken, map[string]any{"parentRunId": top.RunID, "role": "GENERAL", "goal": "go"})
		require.Empty(t, res.Errors, "%s", res.Body)
	}
	jobs := c.Jobs(t, "subagent_dispatch", rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateScheduled)
	require.Len(t, jobs, 1, "dispatch requests did not collapse")
	n, err := c.App.Subagents.Dispatch(context.Background())
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.True(t, slices.ContainsFunc(c.subagents(t), func(s subRow) bool { return s.Status == "QUEUED" }))
}
