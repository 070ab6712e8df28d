package graph_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/usage"
)

// TestBudgetThresholdsOnceUnder50RacingTurns: 50 chat turns sent at once against a token budget
// that about 20 of them use up raise budget.threshold exactly once for each of 50, 80 and 100%,
// delivered to the tenant's webhook; checking again raises nothing more.
func TestBudgetThresholdsOnceUnder50RacingTurns(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	rcv := newReceiver(t, false, func(int) int { return http.StatusOK })
	_, res := createWebhook(t, c.Env, c.s.AccessToken, rcv.URL, []string{"budget.threshold"})
	require.Empty(t, res.Errors, "%s", res.Body)
	c.llm.SetDefault(llmtest.Stream(llmtest.Text("fine"), llmtest.Usage(10, 1000, 0)))
	c.settings(t, map[string]any{"maxTokensPerTask": 1024})
	const perTurn = 1010
	c.setBudget(t, c.s.AccessToken, map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 20 * perTurn})

	convs := make([]string, 50)
	for i := range convs {
		convs[i] = c.conversation(t, map[string]any{"agentic": false})
	}
	var wg sync.WaitGroup
	runs := make(chan string, len(convs))
	for _, conv := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, res := c.send(t, conv, "spend", nil)
			if res.Code() == "BUDGET_EXCEEDED" {
				return
			}
			require.Empty(t, res.Errors, "%s", res.Body)
			runs <- s.RunID
		}()
	}
	wg.Wait()
	close(runs)
	for id := range runs {
		c.waitRun(t, id, 60*time.Second)
	}

	thresholds := func() []int {
		var out []int
		for _, r := range rcv.requests() {
			var p struct {
				Type string
				Data struct{ Threshold int }
			}
			require.NoError(t, json.Unmarshal(r.body, &p))
			require.Equal(t, usage.EventBudgetThreshold, p.Type)
			out = append(out, p.Data.Threshold)
		}
		sort.Ints(out)
		return out
	}
	require.Eventually(t, func() bool { return len(rcv.requests()) >= 3 }, 20*time.Second, 20*time.Millisecond, "%v", thresholds())
	evs, err := c.App.Usage.CheckAlerts(context.Background(), approvalUUID(t, "Tenant", c.s.TenantID))
	require.NoError(t, err)
	require.Empty(t, evs, "every threshold was raised already")
	c.App.Usage.StopAlerts() // no check is left running: what was delivered is all there is
	require.Eventually(t, func() bool {
		ds := deliveries(t, c.Env, c.s.AccessToken)
		for _, d := range ds {
			if d.Status != "DELIVERED" {
				return false
			}
		}
		return len(ds) == len(rcv.requests())
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []int{50, 80, 100}, thresholds())
}

// TestRunawayCostAlert: steady spend (the last 10 minutes like each 10 minutes of the hour
// before) raises no alert; a spike over 5x the trailing average raises budget.runaway once for
// the window, delivered to the webhook.
func TestRunawayCostAlert(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	rcv := newReceiver(t, false, func(int) int { return http.StatusOK })
	_, res := createWebhook(t, c.Env, c.s.AccessToken, rcv.URL, []string{"budget.*"})
	require.Empty(t, res.Errors, "%s", res.Body)
	tenant := approvalUUID(t, "Tenant", c.s.TenantID)
	user := approvalUUID(t, "User", c.s.UserID)
	spend := func(minutesAgo []int, micros int64) {
		c.ownerTx(t, func(tx pgx.Tx) {
			for _, m := range minutesAgo {
				_, err := tx.Exec(context.Background(), `INSERT INTO usage_records (tenant_id, id, run_id, user_id, run_kind, call_index, provider, model,
					input_tokens, output_tokens, cost_micros, created_at) VALUES ($1, $2, $3, $4, 'CHAT_TURN', 0, 'anthropic', 'claude-sonnet-4-5', 10, 10, $5, now() - make_interval(mins => $6))`,
					tenant, uuid.New(), uuid.New(), user, micros, m)
				require.NoError(t, err)
			}
		})
	}
	minutes := func(from, to int) []int {
		var out []int
		for m := from; m < to; m++ {
			out = append(out, m)
		}
		return out
	}
	spend(minutes(1, 70), 1000) // an even 1000 micros a minute for 70 minutes
	evs, err := c.App.Usage.CheckAlerts(context.Background(), tenant)
	require.NoError(t, err)
	require.Empty(t, evs, "steady spend is no runaway")

	spend(minutes(1, 9), 20_000) // the last 10 minutes: 9k + 160k, against 10k per 10 minutes before
	evs, err = c.App.Usage.CheckAlerts(context.Background(), tenant)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, usage.EventBudgetRunaway, evs[0].Type)
	var d struct{ RecentMicros, TrailingHourMicros int64 }
	require.NoError(t, json.Unmarshal(evs[0].Data, &d))
	require.Equal(t, int64(9*1000+8*20_000), d.RecentMicros)
	require.Equal(t, int64(60*1000), d.TrailingHourMicros)
	evs, err = c.App.Usage.CheckAlerts(context.Background(), tenant)
	require.NoError(t, err)
	require.Empty(t, evs, "once per window")

	require.Eventually(t, func() bool { return len(rcv.requests()) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, usage.EventBudgetRunaway, rcv.requests()[0].header.Get("Agentry-Event"))
}
