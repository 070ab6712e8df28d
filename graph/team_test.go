package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// The three phases' models: each phase's requests must name its own.
const (
	teamArchModel = "anthropic:claude-opus-4-5"
	teamExecModel = "anthropic:claude-sonnet-4-5"
	teamRevModel  = "anthropic:claude-haiku-4-5"
)

// phaseOfModel names the phase a request belongs to by its model.
func phaseOfModel(m string) string {
	switch "anthropic:" + m {
	case teamArchModel:
		return "ARCHITECT"
	case teamExecModel:
		return "EXECUTOR"
	case teamRevModel:
		return "REVIEWER"
	}
	return "?" + m
}

// teamTurn is how many replies of the current phase run a request already carries (0: the
// phase's first model call).
func teamTurn(req llmtest.Request) int {
	msgs, _ := req.Body["messages"].([]any)
	n := 0
	for _, m := range msgs {
		if mm, ok := m.(map[string]any); ok && mm["role"] == "assistant" {
			n++
		}
	}
	return n
}

// toolResults returns the text of the tool results the newest user message carries.
func toolResults(req llmtest.Request) string {
	msgs, _ := req.Body["messages"].([]any)
	if len(msgs) == 0 {
		return ""
	}
	b, _ := json.Marshal(msgs[len(msgs)-1])
	return string(b)
}

func toolNames(req llmtest.Request) []string {
	var out []string
	tools, _ := req.Body["tools"].([]any)
	for _, t := range tools {
		if m, ok := t.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["name"]))
		}
	}
	return out
}

// teamScript answers each phase by a function of (phase, how many runs of that phase started
// before, the turn in the phase, the request), and records every request by phase.
type teamScript struct {
	mu     sync.Mutex
	starts map[string]int // phase -> phase runs started (first turns seen)
	reqs   map[string][]llmtest.Request
}

func (s *teamScript) install(srv *llmtest.Server, f func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply) {
	s.starts, s.reqs = map[string]int{}, map[string][]llmtest.Request{}
	srv.SetResponder(func(req llmtest.Request) llmtest.Reply {
		phase, turn := phaseOfModel(req.Model()), teamTurn(req)
		s.mu.Lock()
		if turn == 0 {
			s.starts[phase]++
		}
		nth := s.starts[phase]
		s.reqs[phase] = append(s.reqs[phase], req)
		s.mu.Unlock()
		return f(phase, nth, turn, req)
	})
}

func (s *teamScript) requests(phase string) []llmtest.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llmtest.Request(nil), s.reqs[phase]...)
}

func review(verdict, summary string, issues ...map[string]string) llmtest.Reply {
	if issues == nil {
		issues = []map[string]string{}
	}
	b, _ := json.Marshal(map[string]any{"verdict": verdict, "summary": summary, "issues": issues})
	return llmtest.Stream(llmtest.ToolCall("rv", "submit_review", string(b)))
}

type teamView struct {
	ID, Goal      string
	Plan          *string
	MaxIterations int
	TokenBudget   int64
	TokensUsed    int64
	Run           runView
	Phases        []teamPhaseView
	Verdicts      []struct{ Verdict, Summary string }
}

type teamPhaseView struct {
	Phase, Model, Status string
	Iteration, Attempt   int
	Turns                int
	Tokens               int64
	Output               *string
	TerminationReason    *string
	Run                  struct{ ID string }
	Verdict              *struct {
		Verdict string
		Issues  []struct{ File, Problem string }
	}
}

const teamFields = `id goal plan maxIterations tokenBudget tokensUsed run { id status terminationReason error }
  phases { phase model status iteration attempt turns tokens output terminationReason run { id } verdict { verdict issues { file problem } } }
  verdicts { verdict summary }`

func (c *chatEnv) startTeam(t *testing.T, in map[string]any) (teamView, *apptest.Response) {
	t.Helper()
	res := c.Do(t, c.s.AccessToken, `mutation($in: StartTeamRunInput!) { startTeamRun(input: $in) { `+teamFields+` } }`, map[string]any{"in": in})
	var out struct{ StartTeamRun teamView }
	if len(res.Errors) == 0 {
		res.Decode(t, &out)
	}
	return out.StartTeamRun, res
}

func (c *chatEnv) team(t *testing.T, id string) teamView {
	t.Helper()
	var out struct{ TeamRun teamView }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { teamRun(id: $id) { `+teamFields+` } }`, map[string]any{"id": id}).Decode(t, &out)
	return out.TeamRun
}

// newTeamEnv is a chat environment whose user lets the executor's writes run without asking.
// wsFiles returns the workspace as path -> content, read through the API.
func (c *chatEnv) wsFiles(t *testing.T) map[string]string {
	t.Helper()
	var out struct {
		Workspace struct{ Files []struct{ Path string } }
	}
	c.Do(t, c.s.AccessToken, `{ workspace { files { path } } }`, nil).Decode(t, &out)
	files := map[string]string{}
	for _, f := range out.Workspace.Files {
		var one struct {
			Workspace struct{ File struct{ Content string } }
		}
		c.Do(t, c.s.AccessToken, `query($p: String!) { workspace { file(path: $p) { content } } }`, map[string]any{"p": f.Path}).Decode(t, &one)
		files[f.Path] = one.Workspace.File.Content
	}
	return files
}

func newTeamEnv(t *testing.T) (*chatEnv, string, *teamScript) {
	t.Helper()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true})
	return c, c.conversation(t, nil), &teamScript{}
}

func teamInput(conv, goal string, extra map[string]any) map[string]any {
	in := map[string]any{
		"conversationId": conv, "goal": goal,
		"architect": map[string]any{"model": teamArchModel},
		"executor":  map[string]any{"model": teamExecModel},
		"reviewer":  map[string]any{"model": teamRevModel},
	}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// teamEvents is the team.* events of a run in order, as "type" or "type:PHASE".
func (c *chatEnv) teamEvents(t *testing.T, runID string) []string {
	t.Helper()
	var out []string
	for _, e := range c.eventsOf(t, runID) {
		if !strings.HasPrefix(e.Type, "team.") {
			continue
		}
		var d struct{ Phase string }
		_ = json.Unmarshal(e.Data, &d)
		if d.Phase != "" {
			out = append(out, e.Type+":"+d.Phase)
		} else {
			out = append(out, e.Type)
		}
	}
	return out
}

// TestTeamRequestChangesThenApprove: the reviewer asks for changes once, then approves: two
// iterations, the team events in exactly the issue's order, the second executor prompt holds
// the review's issues (not the first executor's transcript), the reviewer sees the diff, each
// phase's requests name its own model, and teamRun shows the phases and verdicts.
func TestTeamRequestChangesThenApprove(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch phase {
		case "ARCHITECT":
			return llmtest.Stream(llmtest.Text("1. Write greeting.txt with a greeting."))
		case "EXECUTOR":
			if turn == 0 {
				return llmtest.Stream(llmtest.ToolCall("w", "write_file", fmt.Sprintf(`{"path":"greeting.txt","content":"hello v%d"}`, nth)))
			}
			return llmtest.Stream(llmtest.Text(fmt.Sprintf("executor summary number %d", nth)))
		case "REVIEWER":
			if turn == 0 && nth == 1 {
				return review("REQUEST_CHANGES", "not loud enough", map[string]string{"file": "greeting.txt", "problem": "the greeting must say WORLD", "suggestion": "write hello WORLD"})
			}
			if turn == 0 {
				return review("APPROVE", "looks right")
			}
			return llmtest.Stream(llmtest.Text("review done"))
		}
		return llmtest.Stream(llmtest.Text("unexpected model " + req.Model()))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Greet the world in greeting.txt", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "RUNNING", tv.Run.Status)
	require.Equal(t, 3, tv.MaxIterations, "the default")
	require.EqualValues(t, 500_000, tv.TokenBudget, "the default")

	fin := c.waitRun(t, tv.Run.ID, 60*time.Second)
	require.Equal(t, "COMPLETED", fin.Status, "%+v", fin)
	require.Equal(t, "approved", *fin.TerminationReason)

	require.Equal(t, []string{
		"team.run.started",
		"team.phase.started:ARCHITECT", "team.phase.completed:ARCHITECT",
		"team.phase.started:EXECUTOR", "team.phase.completed:EXECUTOR",
		"team.phase.started:REVIEWER", "team.phase.completed:REVIEWER",
		"team.review.decision",
		"team.phase.started:EXECUTOR", "team.phase.completed:EXECUTOR",
		"team.phase.started:REVIEWER", "team.phase.completed:REVIEWER",
		"team.review.decision",
		"team.run.completed",
	}, c.teamEvents(t, tv.Run.ID))

	exec := s.requests("EXECUTOR")
	var second string
	for _, r := range exec {
		if teamTurn(r) == 0 && strings.Contains(string(r.Raw), "Iteration 2") {
			second = string(r.Raw)
		}
	}
	require.NotEmpty(t, second, "the second executor's first request")
	require.Contains(t, second, "the greeting must say WORLD")
	require.Contains(t, second, "write hello WORLD")
	require.NotContains(t, second, "executor summary number 1", "the first executor's transcript is not carried over")
	revs := s.requests("REVIEWER")
	require.Contains(t, string(revs[0].Raw), "+hello v1", "the first review sees the diff of the team's changes")
	require.NotContains(t, toolNames(revs[0]), "write_file")
	require.Contains(t, toolNames(revs[0]), "submit_review")

	// Each phase's requests named its model, and carried its system prompt.
	for phase, model := range map[string]string{"ARCHITECT": teamArchModel, "EXECUTOR": teamExecModel, "REVIEWER": teamRevModel} {
		reqs := s.requests(phase)
		require.NotEmpty(t, reqs, phase)
		for _, r := range reqs {
			require.Equal(t, strings.TrimPrefix(model, "anthropic:"), r.Model())
			require.Contains(t, string(r.Raw), "You are the "+strings.ToUpper(phase[:1])+strings.ToLower(phase[1:]))
		}
	}

	got := c.team(t, tv.ID)
	require.NotNil(t, got.Plan)
	require.Contains(t, *got.Plan, "Write greeting.txt")
	require.Len(t, got.Phases, 5)
	want := []struct {
		phase string
		it    int
	}{{"ARCHITECT", 1}, {"EXECUTOR", 1}, {"REVIEWER", 1}, {"EXECUTOR", 2}, {"REVIEWER", 2}}
	var sum int64
	for i, p := range got.Phases {
		require.Equal(t, want[i].phase, p.Phase)
		require.Equal(t, want[i].it, p.Iteration)
		require.Equal(t, "COMPLETED", p.Status)
		require.Positive(t, p.Tokens)
		require.Positive(t, p.Turns)
		sum += p.Tokens
	}
	require.Equal(t, sum, got.TokensUsed, "the team budget counted every phase's tokens")
	// The TEAM run's totals (its page's header) roll its phases' usage up.
	var tot struct {
		Run struct{ TotalInputTokens, TotalOutputTokens, TotalCostMicros int64 }
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { totalInputTokens totalOutputTokens totalCostMicros } }`,
		map[string]any{"id": tv.Run.ID}).Decode(t, &tot)
	require.Equal(t, sum, tot.Run.TotalInputTokens+tot.Run.TotalOutputTokens, "the team run's totals hold its phases' usage")
	require.Positive(t, tot.Run.TotalCostMicros)
	require.Equal(t, "anthropic:claude-opus-4-5", got.Phases[0].Model)
	require.Equal(t, "REQUEST_CHANGES", got.Phases[2].Verdict.Verdict)
	require.Equal(t, "greeting.txt", got.Phases[2].Verdict.Issues[0].File)
	require.Len(t, got.Verdicts, 2)
	require.Equal(t, "APPROVE", got.Verdicts[1].Verdict)
	require.Equal(t, "hello v2", c.wsFiles(t)["greeting.txt"])
	// The team run's conversation is free again.
	require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE active_run_id IS NOT NULL AND kind = 'CHAT'`))
}

// TestTeamBlockedThenContinue: BLOCK ends the team run FAILED (blocked) with a team_blocked
// question; approving it runs one more iteration, which the reviewer approves.
func TestTeamBlockedThenContinue(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch {
		case phase == "ARCHITECT":
			return llmtest.Stream(llmtest.Text("plan: write a.txt"))
		case phase == "EXECUTOR" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("w", "write_file", fmt.Sprintf(`{"path":"a.txt","content":"try %d"}`, nth)))
		case phase == "REVIEWER" && turn == 0 && nth == 1:
			return review("BLOCK", "needs the product owner's answer", map[string]string{"problem": "which language?"})
		case phase == "REVIEWER" && turn == 0:
			return review("APPROVE", "fine now")
		}
		return llmtest.Stream(llmtest.Text("done"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Write a.txt", map[string]any{"maxIterations": 1}))
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := c.waitRun(t, tv.Run.ID, 60*time.Second)
	require.Equal(t, "FAILED", fin.Status)
	require.Equal(t, "blocked", *fin.TerminationReason)
	require.Equal(t, "needs the product owner's answer", *fin.Error)

	var out struct {
		Run struct {
			Approvals []struct{ ID, Kind, Status, Question string }
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { approvals { id kind status question } } }`, map[string]any{"id": tv.Run.ID}).Decode(t, &out)
	require.Len(t, out.Run.Approvals, 1, "the team_blocked question only (the rollback question waits for a stop)")
	ap := out.Run.Approvals[0]
	require.Equal(t, "team_blocked", ap.Kind)
	require.Equal(t, "PENDING", ap.Status)
	require.Contains(t, ap.Question, "needs the product owner's answer")

	c.resolve(t, ap.ID, "APPROVE", "Use English.")
	require.Eventually(t, func() bool { return c.run(t, tv.Run.ID).Status == "COMPLETED" }, 60*time.Second, 20*time.Millisecond)
	got := c.team(t, tv.ID)
	require.Len(t, got.Phases, 5, "one more iteration: executor and reviewer of iteration 2")
	require.Equal(t, "EXECUTOR", got.Phases[3].Phase)
	require.Equal(t, 2, got.Phases[3].Iteration)
	require.Equal(t, 2, got.MaxIterations, "continuing granted one more iteration")
	require.Contains(t, string(s.requests("EXECUTOR")[2].Raw), "which language?", "the blocked review's issues go to the next executor")
	evs := c.teamEvents(t, tv.Run.ID)
	require.Equal(t, "team.review.decision", evs[7])
	require.Equal(t, "team.run.failed", evs[8])
	require.Equal(t, "team.run.completed", evs[len(evs)-1])
}

// TestTeamMaxIterations: three REQUEST_CHANGES end the team run FAILED with max_iterations.
func TestTeamMaxIterations(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch {
		case phase == "ARCHITECT":
			return llmtest.Stream(llmtest.Text("plan"))
		case phase == "REVIEWER" && turn == 0:
			return review("REQUEST_CHANGES", fmt.Sprintf("round %d", nth), map[string]string{"problem": fmt.Sprintf("problem %d", nth)})
		case phase == "EXECUTOR" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("w", "write_file", fmt.Sprintf(`{"path":"draft.txt","content":"draft %d"}`, nth)))
		}
		return llmtest.Stream(llmtest.Text("done"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Never good enough", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := c.waitRun(t, tv.Run.ID, 90*time.Second)
	require.Equal(t, "FAILED", fin.Status)
	require.Equal(t, "max_iterations", *fin.TerminationReason)
	got := c.team(t, tv.ID)
	require.Len(t, got.Phases, 7, "architect, then executor and reviewer x 3")
	require.Len(t, got.Verdicts, 3)
	require.Equal(t, 3, got.Phases[6].Iteration)

	// The failed team run asks what to do with its changes (every phase's, as one): rolling
	// back undoes the three executors' writes.
	require.Equal(t, "draft 3", c.wsFiles(t)["draft.txt"])
	code, ext := c.resolveRollback(t, c.s.AccessToken, c.rollbackApproval(t, tv.Run.ID), "ROLLBACK")
	require.Empty(t, code, "%v", ext)
	require.Empty(t, c.wsFiles(t), "rolled back to before the team run")
}

// TestTeamNoVerdict: a reviewer whose submit_review arguments fail the schema gets the
// problems back; ending without a valid verdict it is asked once more; a second failure ends
// the team run with no_verdict.
func TestTeamNoVerdict(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch {
		case phase == "ARCHITECT":
			return llmtest.Stream(llmtest.Text("plan"))
		case phase == "REVIEWER" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("rv", "submit_review", `{"verdict":"MAYBE","summary":"hmm"}`))
		}
		return llmtest.Stream(llmtest.Text("done"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Anything", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := c.waitRun(t, tv.Run.ID, 60*time.Second)
	require.Equal(t, "FAILED", fin.Status)
	require.Equal(t, "no_verdict", *fin.TerminationReason)

	revs := s.requests("REVIEWER")
	require.Len(t, revs, 4, "two reviewer phases of two model calls each")
	fedBack := toolResults(revs[1])
	require.Contains(t, fedBack, "tool_result")
	require.Contains(t, fedBack, "REQUEST_CHANGES", "the enum's values are named")
	require.Contains(t, fedBack, "issues", "the missing property is named")
	require.Contains(t, string(revs[2].Raw), "ended without a valid verdict", "asked once more")
	got := c.team(t, tv.ID)
	require.Len(t, got.Phases, 4)
	require.Equal(t, 2, got.Phases[3].Attempt)
	require.Empty(t, got.Verdicts)
	require.Equal(t, []string{"team.run.failed"}, c.teamEvents(t, tv.Run.ID)[9:])
}

// TestTeamReadOnlyPhases: the architect and the reviewer cannot write: their write_file calls
// are tool errors and nothing is written; write tools are not even offered to them.
func TestTeamReadOnlyPhases(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch {
		case phase == "ARCHITECT" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("a", "write_file", `{"path":"arch.txt","content":"x"}`))
		case phase == "ARCHITECT":
			return llmtest.Stream(llmtest.Text("plan"))
		case phase == "REVIEWER" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("r", "delete_file", `{"path":"exec.txt"}`), llmtest.ToolCall("r2", "write_file", `{"path":"rev.txt","content":"x"}`))
		case phase == "REVIEWER" && turn == 1:
			return review("APPROVE", "ok")
		case phase == "EXECUTOR" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("e", "write_file", `{"path":"exec.txt","content":"from the executor"}`))
		}
		return llmtest.Stream(llmtest.Text("done"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Write exec.txt", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := c.waitRun(t, tv.Run.ID, 60*time.Second)
	require.Equal(t, "COMPLETED", fin.Status, "%+v", fin)

	arch := s.requests("ARCHITECT")
	require.NotContains(t, toolNames(arch[0]), "write_file")
	require.Contains(t, toolNames(arch[0]), "read_file")
	require.Contains(t, toolResults(arch[1]), "read-only tools")
	require.Contains(t, toolResults(s.requests("REVIEWER")[1]), "nothing was written")
	tree := c.wsFiles(t)
	require.Equal(t, map[string]string{"exec.txt": "from the executor"}, tree)
	got := c.team(t, tv.ID)
	for _, p := range got.Phases {
		if p.Phase == "EXECUTOR" {
			continue
		}
		r := c.run(t, p.Run.ID)
		for _, tc := range r.ToolCalls {
			if tc.Name == "write_file" || tc.Name == "delete_file" {
				require.Equal(t, "FAILED", tc.Status, "%s in the %s phase", tc.Name, p.Phase)
			}
		}
	}
}

// TestTeamBudget: every model call reports 60,500 tokens; the team budget of 500,000 is
// reserved before each call (worst case) and settled after, so the team run fails with reason
// budget without ever having used more than its budget, and nothing stays reserved.
func TestTeamBudget(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	// The executor's output cap (maxTokensPerTask) stays above what the calls report, so the
	// team budget, not the per-run limit, stops it.
	c.settings(t, map[string]any{"maxTokensPerTask": 131072})
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		if phase == "ARCHITECT" {
			return llmtest.Stream(llmtest.Text("plan"), llmtest.Usage(60_000, 500, 0))
		}
		return llmtest.Stream(llmtest.ToolCall(fmt.Sprintf("l%d", turn), "list_files", `{}`), llmtest.Usage(60_000, 500, 0))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Spend", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := c.waitRun(t, tv.Run.ID, 90*time.Second)
	require.Equal(t, "FAILED", fin.Status, "%+v", fin)
	require.Equal(t, "budget", *fin.TerminationReason)
	got := c.team(t, tv.ID)
	require.LessOrEqual(t, got.TokensUsed, int64(500_000))
	require.Greater(t, got.TokensUsed, int64(500_000-2*64_000), "the budget was used up to its last worst case")
	var sum int64
	for _, p := range got.Phases {
		sum += p.Tokens
	}
	require.Equal(t, sum, got.TokensUsed)
	require.Equal(t, sum, int64(c.count(t, `SELECT coalesce(sum(u.input_tokens + u.output_tokens), 0) FROM usage_records u JOIN team_phases p ON p.run_id = u.run_id`)))
	require.Zero(t, c.count(t, `SELECT count(*) FROM team_runs WHERE tokens_reserved <> 0`))
	require.Zero(t, c.count(t, `SELECT count(*) FROM team_phases WHERE reserved_tokens <> 0`))
	last := got.Phases[len(got.Phases)-1]
	require.Equal(t, "EXECUTOR", last.Phase)
	require.Equal(t, "FAILED", last.Status)
	require.Equal(t, "budget_exceeded", *last.TerminationReason)
}

// TestTeamTimeout: the team's timeout stops the phase in flight (its model stream is closed)
// and the team run fails with reason timeout.
func TestTeamTimeout(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	c.App.Teams.SetMinute(2 * time.Second) // timeoutMinutes: 1 lasts 2 s here
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		if phase == "ARCHITECT" {
			return llmtest.Stream(llmtest.Text("plan"))
		}
		return llmtest.Stream(llmtest.Text("thinking"), llmtest.Delay(time.Minute), llmtest.Text("never"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Slow", map[string]any{"timeoutMinutes": 1}))
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := c.waitRun(t, tv.Run.ID, 30*time.Second)
	require.Equal(t, "FAILED", fin.Status, "%+v", fin)
	require.Equal(t, "timeout", *fin.TerminationReason)
	require.True(t, c.llm.WaitDisconnects(1, 10*time.Second), "the model stream in flight was closed")
	got := c.team(t, tv.ID)
	last := got.Phases[len(got.Phases)-1]
	require.Equal(t, "EXECUTOR", last.Phase)
	require.Equal(t, "TIMED_OUT", last.Status, "the phase in flight was stopped")
}

// TestTeamBadInput: every bad input is BAD_USER_INPUT (or NOT_FOUND / CONFLICT), naming the
// field, and starts nothing.
func TestTeamBadInput(t *testing.T) {
	t.Parallel()
	c, conv, _ := newTeamEnv(t)
	for name, tc := range map[string]struct {
		in   map[string]any
		code string
	}{
		"no goal":         {map[string]any{"conversationId": conv}, "BAD_USER_INPUT"},
		"iterations":      {map[string]any{"conversationId": conv, "goal": "g", "maxIterations": 11}, "BAD_USER_INPUT"},
		"timeout":         {map[string]any{"conversationId": conv, "goal": "g", "timeoutMinutes": 241}, "BAD_USER_INPUT"},
		"budget":          {map[string]any{"conversationId": conv, "goal": "g", "tokenBudget": 10}, "BAD_USER_INPUT"},
		"turns":           {map[string]any{"conversationId": conv, "goal": "g", "executor": map[string]any{"maxTurns": 0}}, "BAD_USER_INPUT"},
		"unknown model":   {map[string]any{"conversationId": conv, "goal": "g", "reviewer": map[string]any{"model": "nope:x"}}, "BAD_USER_INPUT"},
		"neither":         {map[string]any{"goal": "g"}, "BAD_USER_INPUT"},
		"both":            {map[string]any{"conversationId": conv, "taskId": conv, "goal": "g"}, "NOT_FOUND"},
		"foreign conv id": {map[string]any{"conversationId": "nope", "goal": "g"}, "NOT_FOUND"},
	} {
		_, res := c.startTeam(t, tc.in)
		require.Equal(t, tc.code, res.Code(), "%s: %s", name, res.Body)
	}
	require.Zero(t, c.count(t, `SELECT count(*) FROM team_runs`))
	require.Zero(t, c.count(t, `SELECT count(*) FROM runs`))
}

// TestTeamDefaultsInSettings: the team defaults live with the agent settings, with ranges.
func TestTeamDefaultsInSettings(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var out struct {
		UpdateAgentSettings struct {
			Team struct{ MaxIterations, TimeoutMinutes, TokenBudget, ArchitectMaxTurns, ExecutorMaxTurns, ReviewerMaxTurns int }
		}
	}
	res := c.Do(t, c.s.AccessToken, `mutation { updateAgentSettings(input: {team: {maxIterations: 5, executorMaxTurns: 40}}) { team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } } }`, nil)
	res.Decode(t, &out)
	require.Equal(t, 5, out.UpdateAgentSettings.Team.MaxIterations)
	require.Equal(t, 40, out.UpdateAgentSettings.Team.ExecutorMaxTurns)
	require.Equal(t, 30, out.UpdateAgentSettings.Team.TimeoutMinutes)
	require.Equal(t, 500_000, out.UpdateAgentSettings.Team.TokenBudget)
	require.Equal(t, 15, out.UpdateAgentSettings.Team.ArchitectMaxTurns)
	bad := c.Do(t, c.s.AccessToken, `mutation { updateAgentSettings(input: {team: {maxIterations: 11}}) { team { maxIterations } } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", bad.Code(), "%s", bad.Body)

	conv := c.conversation(t, nil)
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("plan")))
	tv, res2 := c.startTeam(t, map[string]any{"conversationId": conv, "goal": "g"})
	require.Empty(t, res2.Errors, "%s", res2.Body)
	require.Equal(t, 5, tv.MaxIterations, "the user's default")
	require.Equal(t, c.model, tv.Phases[0].Model, "the conversation's model by default")
	c.waitRun(t, tv.Run.ID, 60*time.Second)
}

// TestTeamTenantIsolation: another tenant's team run and conversation are NOT_FOUND, exactly
// like missing ones.
func TestTeamTenantIsolation(t *testing.T) {
	t.Parallel()
	c, conv, _ := newTeamEnv(t)
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("plan")))
	tv, res := c.startTeam(t, map[string]any{"conversationId": conv, "goal": "mine"})
	require.Empty(t, res.Errors, "%s", res.Body)
	c.waitRun(t, tv.Run.ID, 60*time.Second)

	other := c.SignUp(t, "", "")
	for _, id := range []string{tv.ID, tv.Run.ID} {
		r := c.Do(t, other.AccessToken, `query($id: ID!) { teamRun(id: $id) { id } }`, map[string]any{"id": id})
		require.Equal(t, "NOT_FOUND", r.Code(), "%s", r.Body)
	}
	r := c.Do(t, other.AccessToken, `query($id: ID!) { run(id: $id) { team { id } } }`, map[string]any{"id": tv.Run.ID})
	require.Equal(t, "NOT_FOUND", r.Code(), "%s", r.Body)
	r = c.Do(t, other.AccessToken, `mutation($in: StartTeamRunInput!) { startTeamRun(input: $in) { id } }`, map[string]any{"in": map[string]any{"conversationId": conv, "goal": "theirs"}})
	require.Equal(t, "NOT_FOUND", r.Code(), "%s", r.Body)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM team_runs`))
}

// TestTeamCancel: cancelRun on the team run cancels the phase in flight (its model stream is
// closed) and ends the team run CANCELLED.
func TestTeamCancel(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	streaming := make(chan struct{})
	var once sync.Once
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		if phase == "ARCHITECT" {
			once.Do(func() { close(streaming) })
			return llmtest.Stream(llmtest.Text("thinking"), llmtest.Delay(time.Minute), llmtest.Text("never"))
		}
		return llmtest.Stream(llmtest.Text("unexpected"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Cancel me", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	select {
	case <-streaming:
	case <-time.After(30 * time.Second):
		t.Fatal("the architect never called the model")
	}
	cres := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": tv.Run.ID})
	require.Empty(t, cres.Errors, "%s", cres.Body)
	fin := c.waitRun(t, tv.Run.ID, 10*time.Second)
	require.Equal(t, "CANCELLED", fin.Status)
	got := c.team(t, tv.ID)
	require.Equal(t, "CANCELLED", c.waitRun(t, got.Phases[0].Run.ID, 30*time.Second).Status, "the phase in flight was cancelled")
	require.True(t, c.llm.WaitDisconnects(1, 10*time.Second), "its model stream was closed")
	require.Len(t, c.team(t, tv.ID).Phases, 1, "nothing started after the cancel")
	evs := c.teamEvents(t, tv.Run.ID)
	require.Equal(t, "team.run.failed", evs[len(evs)-1])
	require.Zero(t, c.count(t, `SELECT count(*) FROM conversations WHERE active_run_id IS NOT NULL`))
}

// TestTeamOnTask: a team run on a task works in a conversation of its own, with the task as its
// goal.
func TestTeamOnTask(t *testing.T) {
	t.Parallel()
	c, _, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		if phase == "REVIEWER" && turn == 0 {
			return review("APPROVE", "ok")
		}
		return llmtest.Stream(llmtest.Text("done"))
	})
	var task struct{ CreateTask struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { createTask(input: {title: "Tidy the docs", description: "Fix the typos in README"}) { id } }`, nil).Decode(t, &task)
	in := teamInput("", "", nil)
	delete(in, "conversationId")
	delete(in, "goal")
	in["taskId"] = task.CreateTask.ID
	tv, res := c.startTeam(t, in)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Contains(t, tv.Goal, "Fix the typos in README")
	require.Equal(t, "COMPLETED", c.waitRun(t, tv.Run.ID, 60*time.Second).Status)
	require.Contains(t, string(s.requests("ARCHITECT")[0].Raw), "Tidy the docs")
}

// TestTeamBlockedExpiredAsksRollback: an unanswered team_blocked question expires as a stop: the
// team run stays FAILED and asks what to do with its changes.
func TestTeamBlockedExpiredAsksRollback(t *testing.T) {
	t.Parallel()
	c, conv, s := newTeamEnv(t)
	s.install(c.llm, func(phase string, nth, turn int, req llmtest.Request) llmtest.Reply {
		switch {
		case phase == "EXECUTOR" && turn == 0:
			return llmtest.Stream(llmtest.ToolCall("w", "write_file", `{"path":"b.txt","content":"b"}`))
		case phase == "REVIEWER" && turn == 0:
			return review("BLOCK", "blocked")
		}
		return llmtest.Stream(llmtest.Text("done"))
	})
	tv, res := c.startTeam(t, teamInput(conv, "Write b.txt", nil))
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "blocked", *c.waitRun(t, tv.Run.ID, 60*time.Second).TerminationReason)
	require.Zero(t, c.count(t, `SELECT count(*) FROM approvals WHERE kind = 'rollback'`), "no rollback question while the team_blocked one waits")
	c.App.Approvals.SetClock(func() time.Time { return time.Now().Add(approval.DefaultTTL + time.Hour) })
	_, err := c.App.Approvals.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM approvals WHERE kind = 'team_blocked' AND status = 'EXPIRED'`))
	c.rollbackApproval(t, tv.Run.ID)
	require.Equal(t, "FAILED", c.run(t, tv.Run.ID).Status)
}
