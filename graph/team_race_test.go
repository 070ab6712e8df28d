package graph_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/run"
)

// teamRace is a team environment without workers, in which a test plays a phase's worker.
type teamRace struct {
	*chatEnv
	owner    *pgx.Conn // the database owner's connection, to see who waits for whom
	tenantID uuid.UUID
}

func newTeamRace(t *testing.T) *teamRace {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t)
	e := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(),
	}})
	c := &chatEnv{Env: e, llm: srv, model: "anthropic:claude-sonnet-4-5", s: e.SignUp(t, "", "")}
	owner, err := pgx.Connect(context.Background(), c.OwnerURL)
	require.NoError(t, err)
	t.Cleanup(func() { owner.Close(context.Background()) })
	return &teamRace{chatEnv: c, owner: owner, tenantID: approvalUUID(t, "Tenant", c.s.TenantID)}
}

// race starts a team run on a new conversation and races its architect's end with outcome o
// (as the executor ends a run: run.Service.InFenceConversation, then FinishTx) against control. When
// forced, the end holds its locks until control waits for one of them, the interleaving in
// which two lock orders that disagree deadlock (40P01 for one of them); otherwise both start
// at once. It returns the team run, control's answer and the end's error.
func (c *teamRace) race(t *testing.T, round int, forced bool, o run.Outcome, control func(conv string, tv teamView) *apptest.Response) (teamView, *apptest.Response, error) {
	t.Helper()
	ctx := context.Background()
	conv := c.conversation(t, nil)
	tv, res := c.startTeam(t, teamInput(conv, fmt.Sprintf("race %d", round), nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	phaseRunID := approvalUUID(t, "Run", tv.Phases[0].Run.ID)
	job := c.JobOfRun(t, phaseRunID)
	require.NotNil(t, job, "round %d: the architect's job", round)
	lease, err := c.App.Runs.Acquire(ctx, c.tenantID, phaseRunID, "race-test", job.ID)
	require.NoError(t, err)

	holding := make(chan int, 1) // the phase end's backend, once it holds its locks
	proceed := make(chan struct{})
	ended := make(chan error, 1)
	end := func() {
		ended <- c.App.Runs.InFenceConversation(ctx, lease, func(ctx context.Context, tx *db.Tx) error {
			var pid int
			if err := tx.Tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			holding <- pid
			<-proceed
			_, err := c.App.Runs.FinishTx(ctx, tx, lease, o)
			return err
		})
	}
	answered := make(chan *apptest.Response, 1)
	act := func() { answered <- control(conv, tv) }
	if forced {
		go end()
		pid := <-holding
		go act()
		// Wait until control waits for a lock the phase's end holds.
		deadline := time.Now().Add(20 * time.Second)
		for {
			var n int
			require.NoError(t, c.owner.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&n))
			if n > 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "round %d: the control never waited for the phase's end", round)
			time.Sleep(2 * time.Millisecond) // a polling interval, not a wait for a result
		}
		close(proceed)
	} else {
		close(proceed)
		go act()
		go end()
	}
	err = <-ended
	return tv, <-answered, err
}

// TestTeamPhaseEndRacesCancel races a phase's end (the worker's transaction that ends the
// architect's run, which moves the team on) against cancelRun on the team run, many times,
// forced into the interleaving of a deadlock in the even rounds (teamRace.race). Neither may
// fail, and every round ends with the team run CANCELLED, no phase running and no conversation
// left with an active run.
func TestTeamPhaseEndRacesCancel(t *testing.T) {
	t.Parallel()
	c := newTeamRace(t)
	const rounds = 16
	for i := range rounds {
		tv, cres, err := c.race(t, i, i%2 == 0, run.Outcome{Status: run.StatusCompleted, TerminationReason: "completed"}, func(_ string, tv teamView) *apptest.Response {
			return c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
		})
		require.NoError(t, err, "round %d: the phase's end", i)
		require.Empty(t, cres.Errors, "round %d: cancelRun: %s", i, cres.Body)

		require.Equal(t, "CANCELLED", c.run(t, tv.Run.ID).Status, "round %d", i)
		for _, p := range c.team(t, tv.ID).Phases {
			require.NotEqual(t, "RUNNING", p.Status, "round %d: %s %d is not left running", i, p.Phase, p.Iteration)
			pr := c.run(t, p.Run.ID)
			require.Contains(t, []string{"COMPLETED", "CANCELLED"}, pr.Status, "round %d: the run of %s %d", i, p.Phase, p.Iteration)
		}
		require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE active_run_id IS NOT NULL`), "round %d: a conversation is left busy", i)
	}
}

// startHeldTeam starts a team run whose architect's first model call waits until the returned
// release is called, then calls list_files (a step); other calls are answered by rest. It
// returns once the architect's first call arrived.
func startHeldTeam(t *testing.T, goal string, rest func(phase string, turn int) llmtest.Reply) (*chatEnv, teamView, *teamScript, func()) {
	t.Helper()
	c, conv, s := newTeamEnv(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		if phase == "ARCHITECT" && turn == 0 {
			arrived <- struct{}{}
			<-release
			return llmtest.Stream(llmtest.ToolCall("l", "list_files", `{}`))
		}
		return rest(phase, turn)
	})
	tv, res := c.startTeam(t, teamInput(conv, goal, nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the architect never called the model")
	}
	return c, tv, s, func() { close(release) }
}

// TestTeamStop: stopRun on a team run stops its phase in flight after its step (the phase
// summarises and ends user_stop) and ends the team run COMPLETED with terminationReason
// user_stop and the phase's reply as its partial result; no further phase starts.
func TestTeamStop(t *testing.T) {
	t.Parallel()
	c, tv, s, release := startHeldTeam(t, "Stop me", func(phase string, turn int) llmtest.Reply {
		if phase == "ARCHITECT" {
			return llmtest.Stream(llmtest.Text("Partial plan: 1. write the file."))
		}
		return llmtest.Stream(llmtest.Text("unexpected " + phase))
	})
	sres := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { stopRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
	require.Empty(t, sres.Errors, "%s", sres.Body)
	release()

	fin := c.waitRun(t, tv.Run.ID, 30*time.Second)
	require.Equal(t, "COMPLETED", fin.Status, "%+v", fin)
	require.Equal(t, "user_stop", *fin.TerminationReason)
	got := c.team(t, tv.ID)
	require.Len(t, got.Phases, 1, "nothing started after the stop")
	require.Equal(t, "COMPLETED", got.Phases[0].Status)
	require.Equal(t, "user_stop", *got.Phases[0].TerminationReason, "the phase stopped after its step")
	require.Len(t, s.requests("ARCHITECT"), 2, "the step, then the stop's summary")
	evs := c.teamEvents(t, tv.Run.ID)
	require.Equal(t, "team.run.completed", evs[len(evs)-1])
	var summary string
	for _, e := range c.eventsOf(t, tv.Run.ID) {
		if e.Type == "team.run.completed" {
			summary = string(e.Data)
		}
	}
	require.Contains(t, summary, "user_stop")
	require.Contains(t, summary, "Partial plan: 1. write the file.", "the partial result")
	require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE active_run_id IS NOT NULL`))
}

// TestTeamPauseResume: pauseRun on a team run pauses its phase in flight after its step (the
// team run stays RUNNING, no further phase starts); resumeRun resumes it and the team goes on
// to the reviewer's approval.
func TestTeamPauseResume(t *testing.T) {
	t.Parallel()
	c, tv, s, release := startHeldTeam(t, "Pause me", func(phase string, turn int) llmtest.Reply {
		switch {
		case phase == "ARCHITECT":
			return llmtest.Stream(llmtest.Text("1. Do it."))
		case phase == "EXECUTOR":
			return llmtest.Stream(llmtest.Text("done"))
		case phase == "REVIEWER" && turn == 0:
			return review("APPROVE", "fine")
		}
		return llmtest.Stream(llmtest.Text("review given"))
	})
	pres := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { pauseRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
	require.Empty(t, pres.Errors, "%s", pres.Body)
	release()

	phaseRun := c.team(t, tv.ID).Phases[0].Run.ID
	deadline := time.Now().Add(30 * time.Second)
	for c.run(t, phaseRun).Status != "PAUSED" {
		require.True(t, time.Now().Before(deadline), "the architect never paused (%s)", c.run(t, phaseRun).Status)
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, "RUNNING", c.run(t, tv.Run.ID).Status)
	require.Len(t, c.team(t, tv.ID).Phases, 1)
	require.Len(t, s.requests("ARCHITECT"), 1, "no model call while paused")

	rres := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { resumeRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
	require.Empty(t, rres.Errors, "%s", rres.Body)
	fin := c.waitRun(t, tv.Run.ID, 60*time.Second)
	require.Equal(t, "COMPLETED", fin.Status, "%+v", fin)
	require.Equal(t, "approved", *fin.TerminationReason)
	got := c.team(t, tv.ID)
	require.Len(t, got.Phases, 3)
	require.Equal(t, "COMPLETED", got.Phases[0].Status)
	// A second pause answers CONFLICT now that the team run has ended.
	again := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { pauseRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
	require.Equal(t, "CONFLICT", again.Code())
}

// TestTeamLastPhaseEndRacesInterrupt races the end of a team's last phase (the architect's run
// ends FAILED, which ends the team run and hands its conversation on) against an INTERRUPT
// sendMessage on the team run's conversation, many times, forced into the interleaving of a
// deadlock in the even rounds (teamRace.race): the send held the team conversation and waited
// for the phase run while the phase's end held the phase run and waited for the team
// conversation. Neither may fail, and every round ends with the team run ended and no phase
// running.
func TestTeamLastPhaseEndRacesInterrupt(t *testing.T) {
	t.Parallel()
	c := newTeamRace(t)
	const rounds = 16
	for i := range rounds {
		tv, sres, err := c.race(t, i, i%2 == 0, run.Outcome{Status: run.StatusFailed, TerminationReason: "error", Error: "the phase failed"}, func(conv string, _ teamView) *apptest.Response {
			_, res := c.send(t, conv, fmt.Sprintf("interrupt %d", i), map[string]any{"ifBusy": "INTERRUPT"})
			return res
		})
		require.NoError(t, err, "round %d: the phase's end", i)
		require.Empty(t, sres.Errors, "round %d: sendMessage: %s", i, sres.Body)

		require.Contains(t, []string{"FAILED", "CANCELLED"}, c.run(t, tv.Run.ID).Status, "round %d", i)
		for _, p := range c.team(t, tv.ID).Phases {
			require.NotEqual(t, "RUNNING", p.Status, "round %d: %s %d is not left running", i, p.Phase, p.Iteration)
		}
	}
}
