// Package metrics holds agentry's Prometheus metrics: the counters, gauges and histograms the
// domains move as things happen, and the collectors that read queue and approval figures when
// /metrics is scraped. Label values are never tenant or user ids (a label per tenant would grow
// without bound); per-tenant figures come from the usage API. docs/api/operations.md lists every name.
//
// A nil *Metrics is valid and records nothing, so a service built without metrics (a unit
// test) needs no special case.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the process's domain metrics, registered on one registry.
type Metrics struct {
	runsFinished   *prometheus.CounterVec
	runDuration    *prometheus.HistogramVec
	ttft           *prometheus.HistogramVec
	modelCalls     *prometheus.CounterVec
	tokens         *prometheus.CounterVec
	cost           *prometheus.CounterVec
	toolCalls      *prometheus.CounterVec
	jobsRetried    *prometheus.CounterVec
	jobsDiscarded  *prometheus.CounterVec
	budgetRefusals *prometheus.CounterVec
	rateRefusals   *prometheus.CounterVec
	wsSubs         prometheus.Gauge
	publishFails   prometheus.Counter
	reaperTakes    prometheus.Counter
	webhooks       *prometheus.CounterVec
	alerts         *prometheus.CounterVec
}

// durationBuckets spans a chat turn's range: tens of milliseconds to tens of minutes.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// New returns the metrics, registered on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_runs_finished_total", Help: "Runs that reached a final status, by kind and status.",
		}, []string{"kind", "status"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentry_run_duration_seconds", Help: "Time from a run's creation to its final status, by kind and status.",
			Buckets: durationBuckets,
		}, []string{"kind", "status"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentry_model_time_to_first_token_seconds", Help: "Time from a model request to its first streamed token, by provider and model.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 30},
		}, []string{"provider", "model"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_model_calls_total", Help: "Model calls by provider, model and outcome (ok, or the failure class: TRANSIENT, RECOVERABLE, TERMINAL).",
		}, []string{"provider", "model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_model_tokens_total", Help: "Tokens metered, by provider, model and direction (input, output, cached).",
		}, []string{"provider", "model", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_model_cost_micros_total", Help: "Cost metered in micro-dollars, by provider and model.",
		}, []string{"provider", "model"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_tool_calls_total", Help: "Tool calls by tool and outcome (completed, failed, rejected).",
		}, []string{"tool", "outcome"}),
		jobsRetried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_jobs_retried_total", Help: "Job attempts that failed and were scheduled again, by queue and kind.",
		}, []string{"queue", "kind"}),
		jobsDiscarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_jobs_discarded_total", Help: "Jobs that failed their last attempt or were cancelled, by queue, kind and state.",
		}, []string{"queue", "kind", "state"}),
		budgetRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_budget_refusals_total", Help: "Work refused because a budget was used up, by where (admission, reservation) and budget scope.",
		}, []string{"stage", "scope"}),
		rateRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_rate_limit_refusals_total", Help: "Requests refused by a rate limit, by limit (spend, auth, create, unavailable).",
		}, []string{"limit"}),
		wsSubs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentry_websocket_subscriptions", Help: "GraphQL subscriptions running on this process's WebSockets.",
		}),
		publishFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentry_redis_publish_failures_total", Help: "Event messages that could not be published to Redis (failed or dropped).",
		}),
		reaperTakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentry_reaper_takeovers_total", Help: "Runs taken over by the reaper because their worker died.",
		}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome (delivered, failed, refused).",
		}, []string{"outcome"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentry_cost_alerts_total", Help: "Budget threshold and runaway-cost alerts raised, by type.",
		}, []string{"type"}),
	}
	reg.MustRegister(m.runsFinished, m.runDuration, m.ttft, m.modelCalls, m.tokens, m.cost, m.toolCalls,
		m.jobsRetried, m.jobsDiscarded, m.budgetRefusals, m.rateRefusals, m.wsSubs, m.publishFails, m.reaperTakes,
		m.webhooks, m.alerts)
	return m
}

// RunFinished counts a run that reached status, took d from its creation.
func (m *Metrics) RunFinished(kind, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.runsFinished.WithLabelValues(kind, status).Inc()
	m.runDuration.WithLabelValues(kind, status).Observe(d.Seconds())
}

// FirstToken observes a model stream's time to its first token.
func (m *Metrics) FirstToken(provider, model string, d time.Duration) {
	if m == nil {
		return
	}
	m.ttft.WithLabelValues(provider, model).Observe(d.Seconds())
}

// ModelCall counts one model call; outcome is "ok" or the failure class.
func (m *Metrics) ModelCall(provider, model, outcome string) {
	if m == nil {
		return
	}
	m.modelCalls.WithLabelValues(provider, model, outcome).Inc()
}

// Metered adds a usage record's tokens and cost.
func (m *Metrics) Metered(provider, model string, input, output, cached, costMicros int64) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(provider, model, "input").Add(float64(input))
	m.tokens.WithLabelValues(provider, model, "output").Add(float64(output))
	m.tokens.WithLabelValues(provider, model, "cached").Add(float64(cached))
	m.cost.WithLabelValues(provider, model).Add(float64(costMicros))
}

// ToolCall counts a tool call's end; outcome is completed, failed or rejected.
func (m *Metrics) ToolCall(tool, outcome string) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
}

// JobRetried counts a failed job attempt that River scheduled again.
func (m *Metrics) JobRetried(queue, kind string) {
	if m == nil {
		return
	}
	m.jobsRetried.WithLabelValues(queue, kind).Inc()
}

// JobDiscarded counts a job that ended without success (state discarded or cancelled).
func (m *Metrics) JobDiscarded(queue, kind, state string) {
	if m == nil {
		return
	}
	m.jobsDiscarded.WithLabelValues(queue, kind, state).Inc()
}

// BudgetRefused counts work refused by a budget at stage (admission, reservation).
func (m *Metrics) BudgetRefused(stage, scope string) {
	if m == nil {
		return
	}
	m.budgetRefusals.WithLabelValues(stage, scope).Inc()
}

// RateLimited counts a request refused by limit.
func (m *Metrics) RateLimited(limit string) {
	if m == nil {
		return
	}
	m.rateRefusals.WithLabelValues(limit).Inc()
}

// SubscriptionStarted and SubscriptionEnded move the running-subscriptions gauge.
func (m *Metrics) SubscriptionStarted() {
	if m != nil {
		m.wsSubs.Inc()
	}
}

// SubscriptionEnded: see SubscriptionStarted.
func (m *Metrics) SubscriptionEnded() {
	if m != nil {
		m.wsSubs.Dec()
	}
}

// PublishFailed counts n event messages that did not reach Redis.
func (m *Metrics) PublishFailed(n int) {
	if m != nil {
		m.publishFails.Add(float64(n))
	}
}

// ReaperTookOver counts n runs the reaper took over.
func (m *Metrics) ReaperTookOver(n int) {
	if m != nil && n > 0 {
		m.reaperTakes.Add(float64(n))
	}
}

// WebhookDelivery counts one delivery attempt by outcome.
func (m *Metrics) WebhookDelivery(outcome string) {
	if m != nil {
		m.webhooks.WithLabelValues(outcome).Inc()
	}
}

// Alert counts one cost alert of type typ (budget.threshold, budget.runaway).
func (m *Metrics) Alert(typ string) {
	if m != nil {
		m.alerts.WithLabelValues(typ).Inc()
	}
}
