package graph_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/routine"
)

// A CRON routine at every minute, with three worker processes scheduling it on one clock (the
// test's), fires exactly once per tick over three ticks, and says when it fires next.
func TestCronRoutineFiresOncePerTickAcrossProcesses(t *testing.T) {
	t.Parallel()
	apptest.Serial(t)
	srv := llmtest.NewAnthropicServer(t)
	env := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(), "AGENTRY_DEFAULT_MODEL": "anthropic:claude-sonnet-4-5"}
	url := dbtest.URL(t)
	var procs []*apptest.Env
	for range 3 {
		procs = append(procs, apptest.Start(t, apptest.Options{DatabaseURL: url, Env: env}))
	}
	var now atomic.Int64
	t0 := time.Date(2031, 3, 1, 9, 0, 30, 0, time.UTC)
	now.Store(t0.UnixNano())
	for _, p := range procs {
		p.App.Routines.SetClock(func() time.Time { return time.Unix(0, now.Load()).UTC() })
	}
	e := &routineEnv{&taskEnv{Env: procs[0], llm: srv, s: procs[0].SignUp(t, "", "")}}
	id := e.saveRoutine(t, map[string]any{
		"name": "Every minute", "trigger": "CRON", "cron": "* * * * *", "timezone": "Europe/Paris",
		"steps": []map[string]any{
			{"key": "check", "name": "Check", "type": "LAMBDA", "entry": true, "config": map[string]any{
				"script": "def main(ctx):\n    return {'passed': ctx['is_cron_trigger'], 'output': 'tick'}\n"}},
			{"key": "end", "name": "End", "type": "TERMINAL"},
		},
		"edges": []map[string]any{{"from": "check", "to": "end", "condition": "ON_PASS"}},
	})
	var rt struct {
		Routine struct{ NextFireAt time.Time }
	}
	e.mustDo(t, `query($id: ID!) { routine(id: $id) { nextFireAt } }`, map[string]any{"id": id}, &rt)
	require.Equal(t, t0.Truncate(time.Minute).Add(time.Minute), rt.Routine.NextFireAt.UTC())

	for tick := 1; tick <= 3; tick++ {
		now.Store(t0.Truncate(time.Minute).Add(time.Duration(tick)*time.Minute + 2*time.Second).UnixNano())
		var wg sync.WaitGroup
		for _, p := range procs {
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := p.App.Routines.ScanCron(context.Background())
					require.NoError(t, err)
				}()
			}
		}
		wg.Wait()
		// Wait for the tick's run to complete.
		deadline := time.Now().Add(60 * time.Second)
		for e.countRows(t, `SELECT count(*)::int FROM runs r JOIN routine_runs s ON s.run_id = r.id WHERE r.status = 'COMPLETED'`) < tick {
			require.True(t, time.Now().Before(deadline), "tick %d did not fire", tick)
			time.Sleep(25 * time.Millisecond)
		}
	}
	// Let any duplicate fire job finish before counting (every fire job has ended).
	deadline := time.Now().Add(30 * time.Second)
	for len(procs[0].Jobs(t, routine.CronFireArgs{}.Kind(), rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled)) > 0 {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(25 * time.Millisecond)
	}
	require.Equal(t, 3, e.countRows(t, `SELECT count(*)::int FROM routine_runs`), "one run per tick")
	require.Equal(t, 3, e.countRows(t, `SELECT count(DISTINCT cron_tick)::int FROM routine_runs`))
	require.Len(t, procs[0].Jobs(t, routine.CronFireArgs{}.Kind()), 3, "one fire job per tick, however many schedulers asked")
	e.mustDo(t, `query($id: ID!) { routine(id: $id) { nextFireAt } }`, map[string]any{"id": id}, &rt)
	require.Equal(t, t0.Truncate(time.Minute).Add(4*time.Minute), rt.Routine.NextFireAt.UTC())

	// Paused: ticks are skipped.
	e.saveRoutine(t, map[string]any{"id": id, "name": "Every minute", "trigger": "CRON", "cron": "* * * * *", "active": false,
		"steps": []map[string]any{{"key": "end", "name": "End", "type": "TERMINAL", "entry": true}}, "edges": []map[string]any{}})
	now.Store(t0.Add(10 * time.Minute).UnixNano())
	n, err := procs[1].App.Routines.ScanCron(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// A CRON step re-evaluates its role's cron_task until the role signals: while it waits, its job
// is snoozed (no worker held; River holds it scheduled: snoozes longer than its scheduler's
// interval are), and it passes when the role signals pass.
func TestCronStepSnoozesUntilPass(t *testing.T) {
	t.Parallel()
	e := newRoutineEnv(t)
	var evaluations atomic.Int32
	e.llm.SetResponder(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(lastMessage(r), "tool_result") {
			return llmtest.Stream(llmtest.Text("noted"))
		}
		if evaluations.Add(1) == 1 {
			return llmtest.Stream(llmtest.ToolCall("c1", "cron_signal", `{"status":"wait","output":"the build is still running"}`))
		}
		return llmtest.Stream(llmtest.ToolCall("c2", "cron_signal", `{"status":"pass","output":"the build is green"}`))
	})
	watcher, _ := e.createRole(t, map[string]any{"name": "Watcher", "systemPrompt": "You watch builds.",
		"templates": map[string]any{"cron_task": "Is the build of {{ routine_name }} green? ({{ step.name }})"}})
	id := e.saveRoutine(t, map[string]any{"name": "Wait for the build", "trigger": "MANUAL", "steps": []map[string]any{
		{"key": "wait", "name": "Build", "type": "CRON", "roleId": watcher, "entry": true, "config": map[string]any{"intervalSeconds": 6}},
		{"key": "end", "name": "End", "type": "TERMINAL"},
	}, "edges": []map[string]any{{"from": "wait", "to": "end", "condition": "ON_PASS"}}})
	var out struct{ RunRoutine struct{ ID string } }
	e.mustDo(t, `mutation($id: ID!) { runRoutine(id: $id, input: "go") { id } }`, map[string]any{"id": id}, &out)

	// The first evaluation says wait: the routine's job is snoozed, no routine job is running.
	deadline := time.Now().Add(60 * time.Second)
	for len(e.Jobs(t, routine.StepArgs{}.Kind(), rivertype.JobStateScheduled)) == 0 {
		require.True(t, time.Now().Before(deadline), "the cron step's job was never snoozed: %v", e.events(t, out.RunRoutine.ID))
		time.Sleep(10 * time.Millisecond)
	}
	require.Empty(t, e.Jobs(t, routine.StepArgs{}.Kind(), rivertype.JobStateRunning), "a waiting cron step holds no worker")

	fin := e.waitRun(t, out.RunRoutine.ID)
	require.Equal(t, "COMPLETED", fin.Status, "%v", fin.Error)
	require.Equal(t, int32(2), evaluations.Load())
	rr := e.routineRun(t, out.RunRoutine.ID)
	require.Equal(t, "wait", rr.StepResults[0].StepKey)
	require.True(t, rr.StepResults[0].Passed)
	require.Equal(t, "the build is green", *rr.StepResults[0].Output)
	require.Equal(t, 1, rr.StepResults[0].ExecutionCount)
	reqs := e.llm.Requests()
	require.Contains(t, string(reqs[0].Raw), "Is the build of Wait for the build green? (Build)")
}
