package graph_test

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// teamWorker is an `agentry worker` child process of the team crash test.
type teamWorker struct {
	cmd  *exec.Cmd
	logs *tpLog
	done chan struct{}
}

func startTeamWorker(t *testing.T, env *apptest.Env, extra map[string]string) *teamWorker {
	t.Helper()
	apptest.Serial(t)
	w := &teamWorker{cmd: exec.Command(apptest.Binary(t), "worker"), logs: &tpLog{}, done: make(chan struct{})}
	w.cmd.Env = env.ProcessEnv(extra)
	w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
	require.NoError(t, w.cmd.Start())
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker %d output:\n%s", w.cmd.Process.Pid, w.logs)
		}
	})
	return w
}

// TestTeamSIGKILLDuringExecutor: the worker process working the executor phase is SIGKILLed
// while the executor's second model call streams (its first step, a file write, committed).
// Another worker process takes the phase over (the reaper, through the phase run's lease): the
// team run completes, every phase ran once, the executor's write happened once, and no phase
// output, reply or usage record is duplicated.
func TestTeamSIGKILLDuringExecutor(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewAnthropicServer(t)
	llmEnv := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(), "AGENTRY_RETRY_BASE_DELAY": "50ms"}
	api := apptest.Start(t, apptest.Options{NoWork: true, Env: llmEnv})
	c := &chatEnv{Env: api, llm: srv, model: teamExecModel, s: api.SignUp(t, "", "")}
	c.settings(t, map[string]any{"autoExecute": true})
	conv := c.conversation(t, nil)

	inFlight := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	execSecond := 0
	s := &teamScript{}
	s.install(srv, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch {
		case phase == "ARCHITECT":
			return llmtest.Stream(llmtest.Text("plan: write crash.txt"))
		case phase == "EXECUTOR" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("w", "write_file", `{"path":"crash.txt","content":"written once"}`))
		case phase == "EXECUTOR":
			mu.Lock()
			execSecond++
			first := execSecond == 1
			mu.Unlock()
			if first {
				once.Do(func() { close(inFlight) })
				// Streams until the worker dies.
				return llmtest.Stream(llmtest.Text("working on it"), llmtest.Delay(2*time.Minute), llmtest.Text("never"))
			}
			return llmtest.Stream(llmtest.Text("executor summary after the crash"))
		case phase == "REVIEWER" && turn == 0:
			return review("APPROVE", "good")
		}
		return llmtest.Stream(llmtest.Text("done"))
	})

	w1 := startTeamWorker(t, api, llmEnv)
	tv, res := c.startTeam(t, teamInput(conv, "Write crash.txt", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	select {
	case <-inFlight:
	case <-time.After(60 * time.Second):
		t.Fatalf("the executor's second call never came; worker output:\n%s", w1.logs)
	}
	require.NoError(t, w1.cmd.Process.Signal(syscall.SIGKILL))
	<-w1.done
	startTeamWorker(t, api, llmEnv)

	// The lease (15 s) expires, the reaper (every 5 s) re-enqueues the phase run.
	fin := c.waitRun(t, tv.Run.ID, 3*time.Minute)
	require.Equal(t, "COMPLETED", fin.Status, "%+v", fin)
	got := c.team(t, tv.ID)
	var phases []string
	for _, p := range got.Phases {
		phases = append(phases, fmt.Sprintf("%s%d/%d:%s", p.Phase, p.Iteration, p.Attempt, p.Status))
	}
	require.Equal(t, []string{"ARCHITECT1/1:COMPLETED", "EXECUTOR1/1:COMPLETED", "REVIEWER1/1:COMPLETED"}, phases, "every phase ran once")
	exec := got.Phases[1]
	require.Equal(t, "executor summary after the crash", *exec.Output)
	require.Equal(t, 2, c.run(t, exec.Run.ID).Turns)

	evs := c.teamEvents(t, tv.Run.ID)
	require.Equal(t, 1, strings.Count(strings.Join(evs, ","), "team.phase.started:EXECUTOR"))
	require.Equal(t, 1, strings.Count(strings.Join(evs, ","), "team.phase.completed:EXECUTOR"))
	require.Equal(t, map[string]string{"crash.txt": "written once"}, c.wsFiles(t))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM workspace_file_versions WHERE path = 'crash.txt'`), "the committed step was not repeated")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM tool_calls WHERE name = 'write_file'`))
	// One stored reply and one usage record per model call of the executor phase.
	require.Equal(t, 2, c.count(t, `SELECT count(*) FROM messages m JOIN team_phases p ON p.run_id = m.run_id WHERE p.phase = 'EXECUTOR' AND m.role = 'ASSISTANT'`))
	require.Equal(t, 0, c.count(t, `SELECT count(*) FROM (SELECT run_id, call_index FROM usage_records GROUP BY 1, 2 HAVING count(*) > 1) d`))
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM team_phases WHERE phase = 'EXECUTOR'`))
	require.Zero(t, c.count(t, `SELECT count(*) FROM team_runs WHERE tokens_reserved <> 0`))
	// The interrupted attempt did not count toward the team's tokens twice.
	var sum int64
	for _, p := range got.Phases {
		sum += p.Tokens
	}
	require.Equal(t, sum, got.TokensUsed)
}
