package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// The executor's deciders without a database: the ErrorClassifier, the AdaptiveTerminator and
// stop-intent detection, each case a row.

func TestErrorClassifier(t *testing.T) {
	t.Parallel()
	read := func(args, err string) agent.Failure {
		return agent.Failure{Name: "read_file", Args: []byte(args), Error: err}
	}
	for _, tc := range []struct {
		name        string
		failures    []agent.Failure
		earlier     []agent.Failure
		consecutive int
		want        agent.Decision
	}{
		{"a first failure goes back to the model", []agent.Failure{read(`{"path":"a"}`, "no such file")}, nil, 1, agent.Continue},
		{"other arguments are another approach", []agent.Failure{read(`{"path":"b"}`, "no such file")}, []agent.Failure{read(`{"path":"a"}`, "no such file")}, 2, agent.Continue},
		{"the same call failing again backtracks", []agent.Failure{read(`{"path":"a"}`, "no such file")}, []agent.Failure{read(`{"path":"a"}`, "no such file")}, 2, agent.Backtrack},
		{"the same arguments spaced differently are the same call", []agent.Failure{read(`{ "path" : "a" }`, "x")}, []agent.Failure{read(`{"path":"a"}`, "y")}, 2, agent.Backtrack},
		{"the same arguments to another tool are another call", []agent.Failure{{Name: "list_files", Args: []byte(`{"path":"a"}`), Error: "x"}}, []agent.Failure{read(`{"path":"a"}`, "x")}, 2, agent.Continue},
		{"an unknown tool backtracks", []agent.Failure{{Name: "fly", Args: []byte(`{}`), Error: "unknown tool fly"}}, nil, 1, agent.Backtrack},
		{"five in a row fail gracefully", []agent.Failure{read(`{"path":"e"}`, "no such file")}, nil, agent.MaxConsecutiveFailures, agent.FailGracefully},
		{"five in a row win over a repeat", []agent.Failure{read(`{"path":"a"}`, "x")}, []agent.Failure{read(`{"path":"a"}`, "x")}, agent.MaxConsecutiveFailures, agent.FailGracefully},
		{"permission denied escalates", []agent.Failure{read(`{"path":"a"}`, "open a: Permission denied")}, nil, 1, agent.Escalate},
		{"requires approval escalates", []agent.Failure{read(`{}`, "this change requires approval")}, nil, 1, agent.Escalate},
		{"forbidden escalates even at the limit", []agent.Failure{read(`{}`, "403 Forbidden")}, nil, agent.MaxConsecutiveFailures, agent.Escalate},
		{"one call needing a person escalates the step", []agent.Failure{read(`{"path":"a"}`, "no such file"), read(`{"path":"b"}`, "not allowed")}, nil, 2, agent.Escalate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, agent.ErrorClassifier{}.Classify(tc.failures, tc.earlier, tc.consecutive))
		})
	}
}

func TestAdaptiveTerminator(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := func(ago time.Duration) *time.Time { s := now.Add(-ago); return &s }
	user := func(s string) []dbsqlc.Message { return []dbsqlc.Message{{Role: "USER", Content: s}} }
	for _, tc := range []struct {
		name      string
		limits    agent.Limits
		maxTokens int
		run       dbsqlc.Run
		calls     int
		newer     []dbsqlc.Message
		confirmed int
		want      agent.Signal
		stop      bool
	}{
		{name: "nothing to stop for", limits: agent.Limits{MaxTurns: 10}, run: dbsqlc.Run{StartedAt: started(time.Minute)}, calls: 3},
		{name: "the turn limit", limits: agent.Limits{MaxTurns: 10}, calls: 10, want: agent.Signal{Reason: agent.ReasonMaxTurns}, stop: true},
		{name: "under the turn limit", limits: agent.Limits{MaxTurns: 10}, calls: 9},
		{name: "no turn limit", calls: 1000},
		{name: "the wall clock", limits: agent.Limits{MaxDuration: 30 * time.Minute}, run: dbsqlc.Run{StartedAt: started(30 * time.Minute)}, want: agent.Signal{Reason: agent.ReasonMaxDuration}, stop: true},
		{name: "within the wall clock", limits: agent.Limits{MaxDuration: 30 * time.Minute}, run: dbsqlc.Run{StartedAt: started(29 * time.Minute)}},
		{name: "never started has no wall clock yet", limits: agent.Limits{MaxDuration: time.Second}},
		{name: "consecutive failures", run: dbsqlc.Run{ConsecutiveFailures: agent.MaxConsecutiveFailures}, want: agent.Signal{Reason: agent.ReasonFailures}, stop: true},
		{name: "too many backtracks", run: dbsqlc.Run{Backtracks: agent.MaxBacktracks}, want: agent.Signal{Reason: agent.ReasonCircuitOpen}, stop: true},
		{name: "the token budget", maxTokens: 1000, run: dbsqlc.Run{OutputTokens: 1000}, want: agent.Signal{Reason: agent.ReasonBudget}, stop: true},
		{name: "within the token budget", maxTokens: 1000, run: dbsqlc.Run{OutputTokens: 999}},
		{name: "the user says stop", newer: user("stop"), want: agent.Signal{Reason: agent.ReasonUserIntent}, stop: true},
		{name: "the user says something else", newer: user("and also the tests")},
		{name: "the duration comes before the user's stop", limits: agent.Limits{MaxDuration: time.Minute}, run: dbsqlc.Run{StartedAt: started(time.Hour)}, newer: user("stop"), want: agent.Signal{Reason: agent.ReasonMaxDuration}, stop: true},
		{name: "the user's stop comes before the turn limit", limits: agent.Limits{MaxTurns: 5}, calls: 5, newer: user("never mind"), want: agent.Signal{Reason: agent.ReasonUserIntent}, stop: true},
		{name: "confirm every 20 turns", limits: agent.Limits{MaxTurns: 100, ConfirmAfter: 20}, calls: 20, want: agent.Signal{Confirm: true}, stop: true},
		{name: "confirmed at 20 goes on", limits: agent.Limits{MaxTurns: 100, ConfirmAfter: 20}, calls: 20, confirmed: 20},
		{name: "between confirmations", limits: agent.Limits{MaxTurns: 100, ConfirmAfter: 20}, calls: 21, confirmed: 20},
		{name: "the turn limit comes before a confirmation", limits: agent.Limits{MaxTurns: 40, ConfirmAfter: 20}, calls: 40, confirmed: 20, want: agent.Signal{Reason: agent.ReasonMaxTurns}, stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			term := agent.AdaptiveTerminator{Limits: tc.limits, MaxTokens: tc.maxTokens, Now: func() time.Time { return now }}
			got, stop := term.Check(tc.run, tc.calls, tc.newer, tc.confirmed)
			require.Equal(t, tc.stop, stop)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestStopIntent(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		"stop":                           true,
		"Stop.":                          true,
		"STOP!":                          true,
		"please stop":                    true,
		"please stop now":                true,
		"  halt  ":                       true,
		"abort":                          true,
		"cancel that":                    true,
		"cancel it!":                     true,
		"never mind":                     true,
		"nevermind":                      true,
		"forget it":                      true,
		"that's enough":                  true,
		"thats enough.":                  true,
		"enough":                         true,
		"how do I stop a server?":        false,
		"stop the server on port 8080":   false,
		"don't stop":                     false,
		"cancel my subscription":         false,
		"please continue":                false,
		"stopwatch":                      false,
		"":                               false,
		"stop" + strings.Repeat(" ", 60): false,
	} {
		require.Equal(t, want, agent.StopIntent(msg), "%q", msg)
	}
}
