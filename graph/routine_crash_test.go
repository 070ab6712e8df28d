package graph_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// A worker process SIGKILLed in the middle of a routine's implementation step: another worker
// takes the step over (its run's lease expires, the reaper resumes it), the routine completes,
// and each step's StepResult is stored once, each step execution worked by one run.
func TestRoutineSurvivesWorkerSIGKILL(t *testing.T) {
	t.Parallel()
	apptest.Serial(t)
	bin := apptest.Binary(t)
	srv := llmtest.NewAnthropicServer(t)
	started := make(chan struct{})
	var implCalls, reviewCalls atomic.Int32
	startedOnce := sync.OnceFunc(func() { close(started) })
	srv.SetResponder(func(r llmtest.Request) llmtest.Reply {
		raw := string(r.Raw)
		if strings.Contains(lastMessage(r), "tool_result") {
			return llmtest.Stream(llmtest.Text("noted"))
		}
		switch {
		case strings.Contains(raw, "IMPLEMENTER"):
			if implCalls.Add(1) == 1 {
				startedOnce()
				// The worker is killed while this reply streams.
				return llmtest.Stream(llmtest.Text("working"), llmtest.Delay(30*time.Second), llmtest.Text("implemented v1"))
			}
			return llmtest.Stream(llmtest.Text("implemented v2"))
		case strings.Contains(raw, "REVIEWER"):
			reviewCalls.Add(1)
			return llmtest.Stream(llmtest.ToolCall("rv", "gate_verdict", `{"passed":true,"feedback":"fine"}`))
		}
		return llmtest.Stream(llmtest.Text("ok"))
	})
	llmEnv := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(), "AGENTRY_DEFAULT_MODEL": "anthropic:claude-sonnet-4-5"}
	api := apptest.Start(t, apptest.Options{NoWork: true, Env: llmEnv})
	extra := map[string]string{"AGENTRY_RETRY_BASE_DELAY": "50ms", "AGENTRY_SHUTDOWN_TIMEOUT": "2s"}
	for k, v := range llmEnv {
		extra[k] = v
	}
	startWorker := func() (*exec.Cmd, *tpLog) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		w := exec.CommandContext(ctx, bin, "worker")
		w.Env = api.ProcessEnv(extra)
		var logs tpLog
		w.Stdout, w.Stderr = &logs, &logs
		require.NoError(t, w.Start())
		t.Cleanup(func() {
			_ = w.Process.Kill()
			_ = w.Wait()
			cancel()
			if t.Failed() {
				t.Logf("worker output:\n%s", logs.String())
			}
		})
		return w, &logs
	}
	w1, _ := startWorker()

	e := &routineEnv{&taskEnv{Env: api, llm: srv, s: api.SignUp(t, "", "")}}
	routineID, _, _ := e.implReviewTest(t, "Crash flow", 3, true)
	tk := e.mustCreateTask(t, map[string]any{"title": "Survive a crash"})
	var out struct{ RunRoutine struct{ ID string } }
	e.mustDo(t, `mutation($id: ID!, $task: ID) { runRoutine(id: $id, taskId: $task) { id } }`, map[string]any{"id": routineID, "task": tk.ID}, &out)

	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the implementation step never called the model")
	}
	require.NoError(t, w1.Process.Kill()) // SIGKILL mid-step
	_ = w1.Wait()
	startWorker()

	fin := e.waitTaskRun(t, out.RunRoutine.ID, 2*time.Minute)
	require.Equal(t, "COMPLETED", fin.Status, "%v", fin.Error)
	require.Equal(t, "DONE", e.task(t, tk.ID).Status)
	require.Equal(t, int32(2), implCalls.Load(), "the interrupted model call was made again, once")
	require.Equal(t, int32(1), reviewCalls.Load())

	// Every step execution has one StepResult and one run.
	require.Equal(t, 4, e.countRows(t, `SELECT count(*)::int FROM routine_step_results`)) // impl, review, test, done
	require.Equal(t, 0, e.countRows(t, `SELECT count(*)::int FROM (SELECT 1 FROM routine_step_results GROUP BY run_id, step_key HAVING count(*) > 1) d`))
	require.Equal(t, 2, e.countRows(t, `SELECT count(*)::int FROM routine_step_runs`)) // impl, review
	rr := e.routineRun(t, out.RunRoutine.ID)
	for _, r := range rr.StepResults {
		require.Equal(t, 1, r.ExecutionCount, r.StepKey)
		require.True(t, r.Passed, r.StepKey)
		if r.StepKey == "impl" {
			require.Equal(t, "implemented v2", *r.Output)
		}
	}
	got := routineEvents(e.events(t, out.RunRoutine.ID))
	n := 0
	for _, g := range got {
		if strings.HasPrefix(g, "step.completed") {
			n++
		}
	}
	require.Equal(t, 4, n, "%v", got)
}
