package graph_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/llm/llmtest"
)

// metricValue returns the value of the sample of family name whose labels include want (a
// counter's or gauge's value, a histogram's count), and 0 when no sample matches.
func (c *chatEnv) metricValue(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := c.App.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !labelsMatch(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsOfATurn: a turn whose first model call is refused with 429 and whose retry calls a
// tool and then answers moves each metric by exactly what happened: one run completed, three
// model calls (one TRANSIENT, two ok), the tokens and cost the provider reported, one tool call,
// one retried job, two first tokens; a subscription moves the gauge up and back down; no label
// carries a tenant id.
func TestMetricsOfATurn(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	var sc script
	sc.install(c.llm, func(n int, _ llmtest.Request) llmtest.Reply {
		switch n {
		case 0:
			return llmtest.Error(429, "slow down")
		case 1:
			return llmtest.Stream(llmtest.ToolCall("t1", "list_files", `{}`), llmtest.Usage(100, 20, 0))
		default:
			return llmtest.Stream(llmtest.Text("the workspace is empty"), llmtest.Usage(150, 10, 40))
		}
	})
	c.settings(t, map[string]any{"autoExecute": true})
	conv := c.conversation(t, nil)
	s, _ := c.send(t, conv, "what is in my workspace?", nil)
	sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0)
	r := c.waitRun(t, s.RunID, 20*time.Second)
	require.Equal(t, "COMPLETED", r.Status)

	model := map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-5"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range model {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	require.Equal(t, 1.0, c.metricValue(t, "agentry_runs_finished_total", map[string]string{"kind": "CHAT_TURN", "status": "COMPLETED"}))
	require.Equal(t, 1.0, c.metricValue(t, "agentry_runs_finished_total", nil), "no other run finished")
	require.Equal(t, 1.0, c.metricValue(t, "agentry_run_duration_seconds", map[string]string{"kind": "CHAT_TURN", "status": "COMPLETED"}))
	require.Equal(t, 1.0, c.metricValue(t, "agentry_model_calls_total", with(map[string]string{"outcome": "TRANSIENT"})))
	require.Equal(t, 2.0, c.metricValue(t, "agentry_model_calls_total", with(map[string]string{"outcome": "ok"})))
	require.Equal(t, 3.0, c.metricValue(t, "agentry_model_calls_total", nil))
	require.Equal(t, 2.0, c.metricValue(t, "agentry_model_time_to_first_token_seconds", model))
	require.Equal(t, 250.0, c.metricValue(t, "agentry_model_tokens_total", with(map[string]string{"direction": "input"})))
	require.Equal(t, 30.0, c.metricValue(t, "agentry_model_tokens_total", with(map[string]string{"direction": "output"})))
	require.Equal(t, 40.0, c.metricValue(t, "agentry_model_tokens_total", with(map[string]string{"direction": "cached"})))
	var cost struct{ Run struct{ CostMicros int64 } }
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { costMicros } }`, map[string]any{"id": s.RunID}).Decode(t, &cost)
	require.Positive(t, cost.Run.CostMicros)
	require.Equal(t, float64(cost.Run.CostMicros), c.metricValue(t, "agentry_model_cost_micros_total", model))
	require.Equal(t, 1.0, c.metricValue(t, "agentry_tool_calls_total", map[string]string{"tool": "list_files", "outcome": "completed"}))
	require.Equal(t, 1.0, c.metricValue(t, "agentry_tool_calls_total", nil))
	require.Equal(t, 1.0, c.metricValue(t, "agentry_jobs_retried_total", map[string]string{"queue": "chat", "kind": "run"}))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_jobs_discarded_total", nil))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_budget_refusals_total", nil))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_rate_limit_refusals_total", nil))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_reaper_takeovers_total", nil))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_redis_publish_failures_total", nil))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_queue_available_jobs", map[string]string{"queue": "chat"}))
	require.Equal(t, 0.0, c.metricValue(t, "agentry_approvals_waiting", nil))

	// The run's subscription ended with the run; one more stays open until it is closed.
	for {
		if _, ok := sub.Next(10 * time.Second); !ok {
			break
		}
	}
	other := c.SubscribeRun(t, c.s.AccessToken, s.RunID, 1000)
	require.Eventually(t, func() bool { return c.metricValue(t, "agentry_websocket_subscriptions", nil) == 1 }, 10*time.Second, 10*time.Millisecond)
	other.Close()
	require.Eventually(t, func() bool { return c.metricValue(t, "agentry_websocket_subscriptions", nil) == 0 }, 10*time.Second, 10*time.Millisecond)

	// No sample anywhere carries an id (a tenant's, a user's, a run's).
	families, err := c.App.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				_, err := uuid.Parse(l.GetValue())
				require.Error(t, err, "%s{%s=%q}", f.GetName(), l.GetName(), l.GetValue())
				require.NotContains(t, []string{c.s.TenantID, c.s.UserID}, l.GetValue(), "%s", f.GetName())
			}
		}
	}
}
