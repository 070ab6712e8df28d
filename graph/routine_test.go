package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// routineEnv is agentry with a scripted test model behind the default model, one owner and the
// helpers of the routine tests.
type routineEnv struct{ *taskEnv }

func newRoutineEnv(t *testing.T) *routineEnv {
	t.Helper()
	return &routineEnv{newTaskEnv(t, true)}
}

func (e *routineEnv) mustDo(t *testing.T, query string, vars map[string]any, out any) {
	t.Helper()
	res := e.Do(t, e.s.AccessToken, query, vars)
	require.Empty(t, res.Errors, "%s", res.Body)
	if out != nil {
		res.Decode(t, out)
	}
}

func (e *routineEnv) createRole(t *testing.T, in map[string]any) (id, color string) {
	t.Helper()
	var out struct{ CreateRole struct{ ID, Color string } }
	e.mustDo(t, `mutation($in: RoleInput!) { createRole(input: $in) { id color } }`, map[string]any{"in": in}, &out)
	return out.CreateRole.ID, out.CreateRole.Color
}

func (e *routineEnv) saveRoutine(t *testing.T, in map[string]any) string {
	t.Helper()
	var out struct{ SaveRoutine struct{ ID string } }
	e.mustDo(t, `mutation($in: SaveRoutineInput!) { saveRoutine(input: $in) { id } }`, map[string]any{"in": in}, &out)
	return out.SaveRoutine.ID
}

type runEvent struct {
	Seq   int
	Type  string
	Phase *string
	Data  map[string]any
}

func (e *routineEnv) events(t *testing.T, runID string) []runEvent {
	t.Helper()
	var out struct{ Run struct{ Events []runEvent } }
	e.mustDo(t, `query($id: ID!) { run(id: $id) { events(first: 1000) { seq type phase data } } }`, map[string]any{"id": runID}, &out)
	return out.Run.Events
}

// routineEvents are the routine.* and step.* events' types (with the step for step events).
func routineEvents(evs []runEvent) []string {
	var out []string
	for _, ev := range evs {
		switch {
		case strings.HasPrefix(ev.Type, "step."):
			out = append(out, fmt.Sprintf("%s %v#%v", ev.Type, ev.Data["step"], ev.Data["executionCount"]))
		case strings.HasPrefix(ev.Type, "routine.phase"):
			out = append(out, fmt.Sprintf("%s %v", ev.Type, ev.Data["phase"]))
		case strings.HasPrefix(ev.Type, "routine."):
			out = append(out, ev.Type)
		}
	}
	return out
}

type routineRunView struct {
	Run struct {
		ID, Status string
		Error      *string
	}
	Context     map[string]any
	StepResults []struct {
		StepKey, StepName, StepType string
		Passed                      bool
		Output                      *string
		InputTokens, OutputTokens   int64
		ExecutionCount              int
		RoleColor                   *string
	}
	Metrics struct {
		InputTokens, OutputTokens int64
		Executions                int
		Steps                     []struct {
			StepKey                   string
			InputTokens, OutputTokens int64
			Executions                int
		}
	}
}

func (e *routineEnv) routineRun(t *testing.T, runID string) routineRunView {
	t.Helper()
	var out struct{ RoutineRun *routineRunView }
	e.mustDo(t, `query($id: ID!) { routineRun(runId: $id) { run { id status error } context
		stepResults { stepKey stepName stepType passed output inputTokens outputTokens executionCount roleColor }
		metrics { inputTokens outputTokens executions steps { stepKey inputTokens outputTokens executions } } } }`, map[string]any{"id": runID}, &out)
	require.NotNil(t, out.RoutineRun)
	return *out.RoutineRun
}

// lastMessage is the raw JSON of a request's last message.
func lastMessage(r llmtest.Request) string {
	msgs := r.Messages()
	if len(msgs) == 0 {
		return ""
	}
	b, _ := json.Marshal(msgs[len(msgs)-1])
	return string(b)
}

// scriptedReviewer answers as the test's roles do: the implementer (system prompt IMPLEMENTER)
// reports its work, the reviewer (REVIEWER) fails the first review through gate_verdict with
// feedback and passes the second. Each reply reports its usage.
type scriptedRoles struct {
	mu      sync.Mutex
	reviews int
	impls   []string // the implementer's prompts (the last user message)
	failAll bool     // the reviewer always fails
}

func (s *scriptedRoles) reply(r llmtest.Request) llmtest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw := string(r.Raw)
	last := lastMessage(r)
	if strings.Contains(last, "tool_result") {
		return llmtest.Stream(llmtest.Text("noted"), llmtest.Usage(30, 2, 0))
	}
	switch {
	case strings.Contains(raw, "REVIEWER"):
		s.reviews++
		if s.reviews == 1 || s.failAll {
			return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("rv%d", s.reviews), "gate_verdict", `{"passed":false,"feedback":"add tests please"}`), llmtest.Usage(40, 7, 0))
		}
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("rv%d", s.reviews), "gate_verdict", `{"passed":true,"feedback":"looks good"}`), llmtest.Usage(40, 7, 0))
	case strings.Contains(raw, "IMPLEMENTER"):
		s.impls = append(s.impls, last)
		return llmtest.Stream(llmtest.Text(fmt.Sprintf("implemented v%d", len(s.impls))), llmtest.Usage(100, 20, 0))
	}
	return llmtest.Stream(llmtest.Text("ok"))
}

func (e *routineEnv) waitRun(t *testing.T, id string) taskRunView {
	t.Helper()
	return e.waitTaskRun(t, id, 60*time.Second)
}

const testLambda = `def main(ctx):
    out = ctx["step_results"]["impl"]["output"]
    return {"passed": "v2" in out, "output": "tests ran on " + out, "data": {"checked": True}}
`

// implReviewTest is the acceptance routine: implementation -> review gate -> testing lambda ->
// terminal, with the gate sending the work back on failure.
func (e *routineEnv) implReviewTest(t *testing.T, name string, maxRetries int, reviewOnFail bool) (routineID, implRole, reviewRole string) {
	t.Helper()
	implRole, _ = e.createRole(t, map[string]any{"name": name + " Implementer", "systemPrompt": "You are the IMPLEMENTER.", "tools": []string{},
		"templates": map[string]any{"task_task": "Work on {{ task.title }}.{% if gate_feedback %} Feedback from {{ task_source }}: {{ gate_feedback }}{% endif %}"}})
	reviewRole, _ = e.createRole(t, map[string]any{"name": name + " Reviewer", "systemPrompt": "You are the REVIEWER.", "tools": []string{},
		"templates": map[string]any{"gate_eval": "Review the work on {{ task.title }}: {{ step_results.impl.output }}"}})
	edges := []map[string]any{
		{"from": "impl", "to": "review"},
		{"from": "review", "to": "test", "condition": "ON_PASS"},
		{"from": "test", "to": "done", "condition": "ON_PASS"},
		{"from": "test", "to": "impl", "condition": "ON_FAIL"},
	}
	if reviewOnFail {
		edges = append(edges, map[string]any{"from": "review", "to": "impl", "condition": "ON_FAIL"})
	}
	routineID = e.saveRoutine(t, map[string]any{
		"name": name, "trigger": "TASK_READY", "maxRetries": maxRetries,
		"steps": []map[string]any{
			{"key": "impl", "name": "Implementation", "type": "AGENT", "roleId": implRole, "phase": "IMPLEMENTATION", "entry": true},
			{"key": "review", "name": "Review", "type": "GATE", "roleId": reviewRole, "phase": "REVIEW"},
			{"key": "test", "name": "Testing", "type": "LAMBDA", "phase": "TESTING", "config": map[string]any{"script": testLambda, "metadata": map[string]any{"suite": "unit"}}},
			{"key": "done", "name": "Done", "type": "TERMINAL"},
		},
		"edges": edges,
	})
	return routineID, implRole, reviewRole
}

// The acceptance routine, triggered by a task becoming READY: the gate fails once, the work goes
// back with the gate's output as gate_feedback and the gate's role as task_source, and the
// routine completes with the task DONE and metrics equal to the usage records.
func TestRoutineGateFailsOnceThenCompletes(t *testing.T) {
	t.Parallel()
	e := newRoutineEnv(t)
	roles := &scriptedRoles{}
	e.llm.SetResponder(roles.reply)
	e.implReviewTest(t, "Feature flow", 3, true)

	tk := e.mustCreateTask(t, map[string]any{"title": "Add the export button"})
	var upd struct{ UpdateTask struct{ Status string } }
	e.mustDo(t, `mutation($id: ID!) { updateTask(id: $id, input: {status: READY}) { status } }`, map[string]any{"id": tk.ID}, &upd)
	require.Equal(t, "IN_PROGRESS", upd.UpdateTask.Status, "a TASK_READY routine took the task")

	var runs struct {
		Task struct {
			Runs struct {
				Edges []struct{ Node struct{ ID, Kind string } }
			}
		}
	}
	e.mustDo(t, `query($id: ID!) { task(id: $id) { runs { edges { node { id kind } } } } }`, map[string]any{"id": tk.ID}, &runs)
	require.Len(t, runs.Task.Runs.Edges, 1)
	runID := runs.Task.Runs.Edges[0].Node.ID
	require.Equal(t, "ROUTINE", runs.Task.Runs.Edges[0].Node.Kind)

	fin := e.waitRun(t, runID)
	require.Equal(t, "COMPLETED", fin.Status, "%v", fin.Error)
	require.Equal(t, "DONE", e.task(t, tk.ID).Status)

	got := routineEvents(e.events(t, runID))
	require.Equal(t, []string{
		"routine.status_changed",
		"routine.phase_started IMPLEMENTATION", "step.started impl#1", "step.completed impl#1", "routine.phase_completed IMPLEMENTATION",
		"routine.phase_started REVIEW", "step.started review#1", "step.warning review#1", "routine.phase_failed REVIEW",
		"routine.phase_started IMPLEMENTATION", "step.started impl#2", "step.completed impl#2", "routine.phase_completed IMPLEMENTATION",
		"routine.phase_started REVIEW", "step.started review#2", "step.completed review#2", "routine.phase_completed REVIEW",
		"routine.phase_started TESTING", "step.started test#1", "step.completed test#1", "routine.phase_completed TESTING",
		"step.started done#1", "step.completed done#1",
		"routine.completed", "routine.status_changed",
	}, got)

	roles.mu.Lock()
	impls := slicesClone(roles.impls)
	roles.mu.Unlock()
	require.Len(t, impls, 2)
	require.NotContains(t, impls[0], "add tests please")
	require.Contains(t, impls[1], "Feedback from Feature flow Reviewer: add tests please", "the second implementation prompt carries gate_feedback and task_source")

	rr := e.routineRun(t, runID)
	require.Equal(t, "COMPLETED", rr.Run.Status)
	require.Len(t, rr.StepResults, 6) // impl, review, impl, review, test, done
	var sumIn, sumOut int64
	for _, r := range rr.StepResults {
		sumIn += r.InputTokens
		sumOut += r.OutputTokens
	}
	require.Equal(t, sumIn, rr.Metrics.InputTokens)
	require.Equal(t, sumOut, rr.Metrics.OutputTokens)
	require.Equal(t, 6, rr.Metrics.Executions)
	usageIn := e.countRows(t, `SELECT coalesce(sum(u.input_tokens), 0)::int FROM usage_records u JOIN routine_step_runs s ON s.tenant_id = u.tenant_id AND s.step_run_id = u.run_id JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.routine_run_id WHERE r.id = (SELECT id FROM runs WHERE kind = 'ROUTINE' AND task_id IS NOT NULL ORDER BY id DESC LIMIT 1)`)
	usageOut := e.countRows(t, `SELECT coalesce(sum(u.output_tokens), 0)::int FROM usage_records u JOIN routine_step_runs s ON s.tenant_id = u.tenant_id AND s.step_run_id = u.run_id JOIN runs r ON r.tenant_id = s.tenant_id AND r.id = s.routine_run_id WHERE r.id = (SELECT id FROM runs WHERE kind = 'ROUTINE' AND task_id IS NOT NULL ORDER BY id DESC LIMIT 1)`)
	require.Equal(t, int64(usageIn), rr.Metrics.InputTokens, "metrics equal the usage records")
	require.Equal(t, int64(usageOut), rr.Metrics.OutputTokens)
	require.Equal(t, int64(2*100+2*(40+30)), rr.Metrics.InputTokens)
	// The lambda saw the context and its result is stored; the context has every step's result.
	for _, r := range rr.StepResults {
		if r.StepKey == "test" {
			require.True(t, r.Passed)
			require.Equal(t, "tests ran on implemented v2", *r.Output)
		}
		if r.StepKey == "review" {
			require.NotNil(t, r.RoleColor)
		}
	}
	results := rr.Context["step_results"].(map[string]any)
	require.Contains(t, results, "done")
	// Each execution's result is stored once.
	require.Equal(t, 6, e.countRows(t, `SELECT count(*)::int FROM routine_step_results`))

	// Deleting the routine keeps its run's record: context and step results.
	var rts struct{ Routines []struct{ ID string } }
	e.mustDo(t, `{ routines { id } }`, nil, &rts)
	e.mustDo(t, `mutation($id: ID!) { deleteRoutine(id: $id) }`, map[string]any{"id": rts.Routines[0].ID}, nil)
	kept := e.routineRun(t, runID)
	require.Len(t, kept.StepResults, 6)
	require.Equal(t, rr.Metrics, kept.Metrics)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// A gate failing with no ON_FAIL edge: step.failed, the phase retried up to maxRetries
// (routine.retry_scheduled), then routine.failed and the task back to OPEN.
func TestRoutineStepFailsWithoutWayOn(t *testing.T) {
	t.Parallel()
	e := newRoutineEnv(t)
	roles := &scriptedRoles{failAll: true}
	e.llm.SetResponder(roles.reply)
	routineID, _, _ := e.implReviewTest(t, "Strict review", 2, false)
	tk := e.mustCreateTask(t, map[string]any{"title": "Fix the login bug"})

	var out struct{ RunRoutine struct{ ID, Kind string } }
	e.mustDo(t, `mutation($id: ID!, $task: ID) { runRoutine(id: $id, taskId: $task) { id kind } }`, map[string]any{"id": routineID, "task": tk.ID}, &out)
	require.Equal(t, "ROUTINE", out.RunRoutine.Kind)
	fin := e.waitRun(t, out.RunRoutine.ID)
	require.Equal(t, "FAILED", fin.Status)
	require.Contains(t, *fin.Error, "add tests please")
	require.Equal(t, "OPEN", e.task(t, tk.ID).Status)

	evs := e.events(t, out.RunRoutine.ID)
	got := routineEvents(evs)
	count := func(typ string) int {
		n := 0
		for _, g := range got {
			if strings.HasPrefix(g, typ) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 3, count("step.failed review"), "%v", got)
	require.Equal(t, 2, count("routine.retry_scheduled"), "%v", got)
	require.Equal(t, 0, count("step.warning"), "%v", got)
	require.Equal(t, 1, count("routine.failed"), "%v", got)
	require.Equal(t, "routine.status_changed", got[len(got)-1])
	var last runEvent
	for _, ev := range evs {
		if ev.Type == "routine.status_changed" {
			last = ev
		}
	}
	require.Equal(t, "OPEN", last.Data["to"])
	require.Contains(t, last.Data["failure"], "add tests please")
	// The retried phase is REVIEW: it starts again at the review, not at the implementation.
	require.Equal(t, 1, count("step.started impl"), "%v", got)
}

// saveRoutine refuses every invalid graph with all of its problems listed, and stores nothing.
func TestSaveRoutineRefusesInvalidGraphs(t *testing.T) {
	t.Parallel()
	e := &routineEnv{newTaskEnv(t, false)}
	role, _ := e.createRole(t, map[string]any{"name": "Worker", "systemPrompt": "You work."})
	agent := func(key string, entry bool) map[string]any {
		return map[string]any{"key": key, "name": key, "type": "AGENT", "roleId": role, "entry": entry}
	}
	gate := func(key string) map[string]any {
		return map[string]any{"key": key, "name": key, "type": "GATE", "roleId": role}
	}
	term := map[string]any{"key": "end", "name": "End", "type": "TERMINAL"}
	edge := func(from, to, cond string) map[string]any {
		return map[string]any{"from": from, "to": to, "condition": cond}
	}
	cases := []struct {
		name  string
		steps []map[string]any
		edges []map[string]any
		want  []string
	}{
		{"no entry", []map[string]any{agent("a", false), term}, []map[string]any{edge("a", "end", "ALWAYS")}, []string{"no entry step"}},
		{"two entries", []map[string]any{agent("a", true), agent("b", true), term}, []map[string]any{edge("a", "end", "ALWAYS"), edge("b", "end", "ALWAYS")}, []string{"2 entry steps (a, b)"}},
		{"no terminal", []map[string]any{agent("a", true), gate("g")}, []map[string]any{edge("a", "g", "ALWAYS")}, []string{"no terminal step"}},
		{"dangling edge", []map[string]any{agent("a", true), term}, []map[string]any{edge("a", "end", "ALWAYS"), edge("a", "ghost", "ON_FAIL")}, []string{`edge a -> ghost: no step "ghost"`}},
		{"unreachable", []map[string]any{agent("a", true), agent("b", false), term}, []map[string]any{edge("a", "end", "ALWAYS"), edge("b", "end", "ALWAYS")}, []string{"unreachable from the entry step: b"}},
		{"unbounded cycle", []map[string]any{agent("a", true), agent("b", false), term}, []map[string]any{edge("a", "b", "ON_PASS"), edge("b", "a", "ALWAYS"), edge("a", "end", "ON_FAIL")}, []string{"cycle a -> b -> a does not pass through a GATE or CRON step"}},
		{"unknown template variable", []map[string]any{{"key": "a", "name": "a", "type": "AGENT", "roleId": role, "entry": true, "config": map[string]any{"prompt": "Do {{ task.titel }}{% if gate_feedbak %}!{% endif %}"}}, term},
			[]map[string]any{edge("a", "end", "ALWAYS")}, []string{`unknown variable "task.titel"`, `unknown variable "gate_feedbak"`}},
		{"everything at once", []map[string]any{agent("a", false), agent("b", false), {"key": "l", "name": "l", "type": "LAMBDA", "config": map[string]any{"script": "def main(ctx) return"}}},
			[]map[string]any{edge("a", "b", "ALWAYS"), edge("b", "a", "ALWAYS"), edge("a", "nowhere", "ON_FAIL")},
			[]string{"no entry step", "no terminal step", `no step "nowhere"`, "cycle a -> b -> a", "step l: config.script"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.Do(t, e.s.AccessToken, `mutation($in: SaveRoutineInput!) { saveRoutine(input: $in) { id } }`, map[string]any{"in": map[string]any{
				"name": "bad " + tc.name, "trigger": "MANUAL", "steps": tc.steps, "edges": tc.edges,
			}})
			require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
			var body struct {
				Errors []struct {
					Message    string
					Extensions struct{ Problems []string }
				}
			}
			require.NoError(t, json.Unmarshal(res.Body, &body))
			require.Len(t, body.Errors, 1)
			all := strings.Join(body.Errors[0].Extensions.Problems, "\n")
			for _, w := range tc.want {
				require.Contains(t, all, w)
				require.Contains(t, body.Errors[0].Message, w)
			}
			require.Len(t, body.Errors[0].Extensions.Problems, len(tc.want), "%s", all)
		})
	}
	require.Equal(t, 0, e.countRows(t, `SELECT count(*)::int FROM routines`), "nothing stored")
}

// Another tenant cannot see, run or edit a tenant's roles and routines: NOT_FOUND, like a
// missing id.
func TestRoutineIsolation(t *testing.T) {
	t.Parallel()
	e := &routineEnv{newTaskEnv(t, false)}
	role, _ := e.createRole(t, map[string]any{"name": "Worker", "systemPrompt": "You work."})
	rt := e.saveRoutine(t, map[string]any{"name": "Mine", "trigger": "MANUAL", "steps": []map[string]any{
		{"key": "a", "name": "A", "type": "AGENT", "roleId": role, "entry": true}, {"key": "end", "name": "End", "type": "TERMINAL"},
	}, "edges": []map[string]any{{"from": "a", "to": "end"}}})
	other := e.SignUp(t, "", "")

	var seen struct {
		Roles    []struct{ ID string }
		Routines []struct{ ID string }
		Routine  *struct{ ID string }
		Node     *struct{ ID string }
	}
	res := e.Do(t, other.AccessToken, `query($id: ID!, $role: ID!) { roles { id } routines { id } routine(id: $id) { id } node(id: $role) { id } }`, map[string]any{"id": rt, "role": role})
	require.Empty(t, res.Errors, "%s", res.Body)
	res.Decode(t, &seen)
	require.Empty(t, seen.Roles)
	require.Empty(t, seen.Routines)
	require.Nil(t, seen.Routine)
	require.Nil(t, seen.Node)

	for _, m := range []struct{ q string }{
		{`mutation($id: ID!) { runRoutine(id: $id) { id } }`},
		{`mutation($id: ID!) { deleteRoutine(id: $id) }`},
		{`mutation($id: ID!) { saveRoutine(input: {id: $id, name: "stolen", trigger: MANUAL, steps: [{key: "end", name: "End", type: TERMINAL, entry: true}], edges: []}) { id } }`},
	} {
		r := e.Do(t, other.AccessToken, m.q, map[string]any{"id": rt})
		require.Equal(t, "NOT_FOUND", r.Code(), "%s", r.Body)
	}
	for _, q := range []string{
		`mutation($id: ID!) { updateRole(id: $id, input: {name: "stolen", systemPrompt: "x"}) { id } }`,
		`mutation($id: ID!) { deleteRole(id: $id) }`,
	} {
		r := e.Do(t, other.AccessToken, q, map[string]any{"id": role})
		require.Equal(t, "NOT_FOUND", r.Code(), "%s", r.Body)
	}
	// A routine of the other tenant cannot use this tenant's role either.
	r := e.Do(t, other.AccessToken, `mutation($in: SaveRoutineInput!) { saveRoutine(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "Theirs", "trigger": "MANUAL", "steps": []map[string]any{
			{"key": "a", "name": "A", "type": "AGENT", "roleId": role, "entry": true}, {"key": "end", "name": "End", "type": "TERMINAL"},
		}, "edges": []map[string]any{{"from": "a", "to": "end"}}}})
	require.Equal(t, "BAD_USER_INPUT", r.Code(), "%s", r.Body)
	require.Contains(t, string(r.Body), "role not found")
	var mine struct{ Routine struct{ Name string } }
	e.mustDo(t, `query($id: ID!) { routine(id: $id) { name } }`, map[string]any{"id": rt}, &mine)
	require.Equal(t, "Mine", mine.Routine.Name, "nothing changed")
}

// Roles get palette colours farthest from those in use; a chosen colour is kept.
func TestRoleColors(t *testing.T) {
	t.Parallel()
	e := &routineEnv{newTaskEnv(t, false)}
	_, c1 := e.createRole(t, map[string]any{"name": "A", "systemPrompt": "x"})
	_, c2 := e.createRole(t, map[string]any{"name": "B", "systemPrompt": "x"})
	_, c3 := e.createRole(t, map[string]any{"name": "C", "systemPrompt": "x", "color": "#123abc"})
	require.Equal(t, "#E6194B", c1)
	require.NotEqual(t, c1, c2)
	require.Equal(t, "#123ABC", c3)
	res := e.Do(t, e.s.AccessToken, `mutation { createRole(input: {name: "A", systemPrompt: "x"}) { id } }`, nil)
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
	res = e.Do(t, e.s.AccessToken, `mutation { createRole(input: {name: "", systemPrompt: "", color: "red", templates: {task_task: "{{ nope }}", bogus: "x"}}) { id } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	for _, w := range []string{"name:", "color:", "systemPrompt:", `templates.task_task: unknown variable`, "templates.bogus: unknown template"} {
		require.Contains(t, string(res.Body), w)
	}
}

var _ = apptest.Session{}

// cancelRun on a routine run waiting for its step: the routine run ends CANCELLED at once, the
// step's run is cancelled with it, the task goes back to OPEN.
func TestRoutineCancel(t *testing.T) {
	t.Parallel()
	e := newRoutineEnv(t)
	started := make(chan struct{}, 1)
	e.llm.SetResponder(func(r llmtest.Request) llmtest.Reply {
		select {
		case started <- struct{}{}:
		default:
		}
		return llmtest.Stream(llmtest.Text("working"), llmtest.Delay(20*time.Second), llmtest.Text("done"))
	})
	routineID, _, _ := e.implReviewTest(t, "Cancelled flow", 3, true)
	tk := e.mustCreateTask(t, map[string]any{"title": "Never finished"})
	var out struct{ RunRoutine struct{ ID string } }
	e.mustDo(t, `mutation($id: ID!, $task: ID) { runRoutine(id: $id, taskId: $task) { id } }`, map[string]any{"id": routineID, "task": tk.ID}, &out)
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the implementation step never called the model")
	}
	var c struct{ CancelRun struct{ Status string } }
	e.mustDo(t, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": out.RunRoutine.ID}, &c)
	require.Equal(t, "CANCELLED", c.CancelRun.Status)
	require.Equal(t, "OPEN", e.task(t, tk.ID).Status)
	// The step's run ends too (its worker records CANCELLED).
	deadline := time.Now().Add(30 * time.Second)
	for e.countRows(t, `SELECT count(*)::int FROM runs r JOIN routine_step_runs s ON s.step_run_id = r.id WHERE r.status = 'CANCELLED'`) != 1 {
		require.True(t, time.Now().Before(deadline), "the step's run was not cancelled")
		time.Sleep(25 * time.Millisecond)
	}
	got := routineEvents(e.events(t, out.RunRoutine.ID))
	require.Equal(t, "routine.failed", got[len(got)-2], "%v", got)
	require.Equal(t, "routine.status_changed", got[len(got)-1], "%v", got)
}

// pauseRun on a routine run: the step in flight finishes, the run parks PAUSED before the next
// step (no job, no worker); resumeRun goes on from there to the end.
func TestRoutinePauseResume(t *testing.T) {
	t.Parallel()
	e := newRoutineEnv(t)
	roles := &scriptedRoles{}
	release := make(chan struct{})
	e.llm.SetResponder(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Raw), "IMPLEMENTER") && !strings.Contains(lastMessage(r), "tool_result") {
			<-release
		}
		return roles.reply(r)
	})
	routineID, _, _ := e.implReviewTest(t, "Paused flow", 3, true)
	var out struct{ RunRoutine struct{ ID string } }
	e.mustDo(t, `mutation($id: ID!) { runRoutine(id: $id, input: "build it") { id } }`, map[string]any{"id": routineID}, &out)
	id := out.RunRoutine.ID
	deadline := time.Now().Add(30 * time.Second)
	for e.countRows(t, `SELECT count(*)::int FROM routine_step_runs`) == 0 {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(10 * time.Millisecond)
	}
	var p struct{ PauseRun struct{ Status string } }
	e.mustDo(t, `mutation($id: ID!) { pauseRun(id: $id) { status } }`, map[string]any{"id": id}, &p)
	close(release)
	deadline = time.Now().Add(30 * time.Second)
	for {
		var r struct{ Run struct{ Status string } }
		e.mustDo(t, `query($id: ID!) { run(id: $id) { status } }`, map[string]any{"id": id}, &r)
		if r.Run.Status == "PAUSED" {
			break
		}
		require.True(t, time.Now().Before(deadline), "still %s", r.Run.Status)
		time.Sleep(25 * time.Millisecond)
	}
	got := routineEvents(e.events(t, id))
	require.Contains(t, got, "step.completed impl#1")
	require.NotContains(t, got, "step.started review#1", "no step started while paused")
	require.Equal(t, 1, e.countRows(t, `SELECT count(*)::int FROM routine_step_runs`), "no step started while paused")

	var r struct{ ResumeRun struct{ Status string } }
	e.mustDo(t, `mutation($id: ID!) { resumeRun(id: $id) { status } }`, map[string]any{"id": id}, &r)
	fin := e.waitRun(t, id)
	require.Equal(t, "COMPLETED", fin.Status, "%v", fin.Error)
	rr := e.routineRun(t, id)
	require.Len(t, rr.StepResults, 6)
}
