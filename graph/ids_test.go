package graph_test

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// idKeyTypes is the type of the global id each id field of event data and error extensions
// carries (a key ending in Id or named here is an id field).
var idKeyTypes = map[string]string{
	"runId": "Run", "activeRunId": "Run", "queuedBehind": "Run", "conversationId": "Conversation",
	"messageId": "Message", "toolCallId": "ToolCall", "approvalId": "Approval", "taskId": "Task",
	"snapshotId": "Snapshot", "projectId": "Project", "budgetId": "Budget", "userId": "User", "decidedBy": "User",
	"subagentId": "Subagent", "childRunId": "Run", "parentRunId": "Run",
}

// requireGlobalIDs checks every top-level id field of data (event data or error extensions):
// null, or a global id of the field's type, never a bare uuid. It returns the ids by key.
func requireGlobalIDs(t *testing.T, what string, data map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range data {
		typ, known := idKeyTypes[k]
		if !known && !strings.HasSuffix(k, "Id") {
			continue
		}
		require.True(t, known, "%s: %s looks like an id field the test does not know: add it to idKeyTypes", what, k)
		if v == nil {
			continue
		}
		s, ok := v.(string)
		require.True(t, ok, "%s: %s is %T, not a global id", what, k, v)
		_, err := uuid.Parse(s)
		require.Error(t, err, "%s: %s is a bare uuid %q, not a global id", what, k, s)
		gotType, _ := isoDecodeID(t, s)
		require.Equal(t, typ, gotType, "%s: %s", what, k)
		out[k] = s
	}
	return out
}

// TestGlobalIDsEverywhere: the ids in event data and error extensions are global ids, the form
// every argument takes (the approvalId of approval.requested is what resolveApproval wants),
// and node(id) resolves every type that implements Node, answering null without an error for
// a missing id.
func TestGlobalIDsEverywhere(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	writeThenDone(c, "notes/todo.md", "buy milk") // write_file needs approval (autoExecute off)
	conv := c.conversation(t, nil)
	s, _ := c.send(t, conv, "write my notes", nil)
	c.pendingApproval(t, s.RunID)

	// The approval's id as the event gives it is what resolveApproval takes.
	evs, err := c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	var approvalID string
	for _, e := range evs {
		if e.Type == "approval.requested" {
			var d struct{ ApprovalID string }
			require.NoError(t, json.Unmarshal(e.Data, &d))
			approvalID = d.ApprovalID
		}
	}
	require.NotEmpty(t, approvalID, "no approval.requested event")

	// An error's extensions carry global ids too: the run that keeps the conversation busy.
	_, res := c.send(t, conv, "are you there?", map[string]any{"ifBusy": "REJECT"})
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
	ext := requireGlobalIDs(t, "sendMessage REJECT", res.Errors[0].Extensions)
	require.Equal(t, s.RunID, ext["activeRunId"])

	c.resolve(t, approvalID, "APPROVE", "go ahead")
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 20*time.Second).Status)

	// Every event's id fields, stored and live alike, are global ids.
	evs, err = c.runEvents(t, s.RunID, 0)
	require.NoError(t, err)
	live := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0).Collect(10*time.Second, nil)
	require.Len(t, live, len(evs))
	ids := map[string]string{} // a global id of each type met in events
	seen := map[string]bool{}
	for i, e := range append(evs, live...) {
		var data map[string]any
		require.NoError(t, json.Unmarshal(e.Data, &data), "%s", e.Data)
		for k, id := range requireGlobalIDs(t, e.Type, data) {
			ids[idKeyTypes[k]] = id
			seen[k] = true
		}
		if i < len(evs) {
			require.JSONEq(t, string(e.Data), string(live[i].Data), "stored and live renderings of event %d", e.Seq)
		}
	}
	for _, k := range []string{"messageId", "toolCallId", "approvalId", "decidedBy", "snapshotId", "projectId"} {
		require.True(t, seen[k], "no event carried %s: the test no longer covers it", k)
	}
	require.Equal(t, s.MessageID, firstOf(t, evs, "task.queued", "messageId"), "task.queued names the user's message")
	require.Equal(t, c.s.UserID, ids["User"])

	// One object of every other Node type.
	var task struct{ CreateTask struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { createTask(input: {title: "Ids"}) { id } }`, nil).Decode(t, &task)
	key, _ := sessCreateKey(t, c.Env, c.s.AccessToken, "ids", "MEMBER")
	var budget struct{ SetBudget struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { setBudget(input: {scope: TENANT, period: DAY, tokenLimit: 1000000}) { id } }`, nil).Decode(t, &budget)
	ids["Run"], ids["Conversation"], ids["Tenant"] = s.RunID, conv, c.s.TenantID
	ids["Task"], ids["ApiKey"], ids["Budget"] = task.CreateTask.ID, key.ID, budget.SetBudget.ID
	// A sub-agent needs a run that has not ended: one waiting for an approval.
	s2, _ := c.send(t, c.conversation(t, nil), "write more notes", nil)
	c.pendingApproval(t, s2.RunID)
	var sub struct{ SpawnSubagent struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation($p: ID!) { spawnSubagent(input: {parentRunId: $p, role: RESEARCHER, goal: "look around"}) { id } }`,
		map[string]any{"p": s2.RunID}).Decode(t, &sub)
	ids["Subagent"] = sub.SpawnSubagent.ID
	spawnEvs, err := c.runEvents(t, s2.RunID, 0)
	require.NoError(t, err)
	require.Equal(t, sub.SpawnSubagent.ID, firstOf(t, spawnEvs, "subagent.spawned", "subagentId"), "subagent.spawned names the sub-agent")

	// A role, a routine of one agent step, and a webhook.
	var role struct{ CreateRole struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { createRole(input: {name: "Ids", systemPrompt: "You check ids."}) { id } }`, nil).Decode(t, &role)
	var routine struct{ SaveRoutine struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation($in: SaveRoutineInput!) { saveRoutine(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "Ids", "trigger": "MANUAL",
		"steps": []map[string]any{{"key": "work", "name": "Work", "type": "AGENT", "roleId": role.CreateRole.ID, "phase": "IMPLEMENTATION", "entry": true},
			{"key": "done", "name": "Done", "type": "TERMINAL"}},
		"edges": []map[string]any{{"from": "work", "to": "done"}},
	}}).Decode(t, &routine)
	var hook struct{ CreateWebhook struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { createWebhook(input: {url: "https://hooks.example.com/agentry", events: ["*"], secret: "0123456789abcdef0123456789abcdef"}) { id } }`, nil).Decode(t, &hook)
	ids["RoutineRole"], ids["Routine"], ids["Webhook"] = role.CreateRole.ID, routine.SaveRoutine.ID, hook.CreateWebhook.ID

	// node(id) resolves every type that implements Node (the schema's list, so that a new one
	// fails this test until node knows it).
	var nodeType struct {
		Type struct{ PossibleTypes []struct{ Name string } } `json:"__type"`
	}
	c.Do(t, c.s.AccessToken, `{ __type(name: "Node") { possibleTypes { name } } }`, nil).Decode(t, &nodeType)
	var types []string
	for _, p := range nodeType.Type.PossibleTypes {
		types = append(types, p.Name)
	}
	sort.Strings(types)
	require.Subset(t, types, []string{"Approval", "Message", "Run", "ToolCall"})
	const nodeQuery = `query($id: ID!) { node(id: $id) { __typename id } }`
	for _, typ := range types {
		id, ok := ids[typ]
		require.True(t, ok, "the test made no %s: make one", typ)
		var out struct {
			Node *struct {
				Typename string `json:"__typename"`
				ID       string
			}
		}
		c.Do(t, c.s.AccessToken, nodeQuery, map[string]any{"id": id}).Decode(t, &out)
		require.NotNil(t, out.Node, "node(%s) is null", typ)
		require.Equal(t, typ, out.Node.Typename)
		require.Equal(t, id, out.Node.ID)
		// A missing object of the type is null, without an error.
		requireNodeNull(t, c.Do(t, c.s.AccessToken, nodeQuery, map[string]any{"id": isoGlobalID(typ, uuid.New())}), "node(missing "+typ+")")
	}
	require.True(t, slices.Contains(types, "User") && slices.Contains(types, "Snapshot"), "%v", types)
}

// firstOf returns the string value of key in the data of the first event of type typ.
func firstOf(t *testing.T, evs []apptest.Event, typ, key string) string {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ {
			var d map[string]any
			require.NoError(t, json.Unmarshal(e.Data, &d))
			s, _ := d[key].(string)
			return s
		}
	}
	t.Fatalf("no %s event", typ)
	return ""
}
