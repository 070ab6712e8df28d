package app

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/jobs"
	"github.com/agentry/agentry/internal/run"
)

// QueueDepthCap is the most available jobs the queue depth gauge counts per queue: River's
// client lists jobs but does not count them, and a scrape must stay cheap.
const QueueDepthCap = 1000

var (
	queueDepth = prometheus.NewDesc("agentry_queue_available_jobs",
		"Jobs waiting to be worked (state available) per queue, counted up to 1000.", []string{"queue"}, nil)
	queueOldest = prometheus.NewDesc("agentry_queue_oldest_available_job_age_seconds",
		"Age of the queue's oldest available job (since it became available); 0 when none waits.", []string{"queue"}, nil)
	approvalsWaiting = prometheus.NewDesc("agentry_approvals_waiting",
		"Approvals waiting for a decision, across every tenant.", nil, nil)
)

// stateCollector reads, when /metrics is scraped, what lives in Postgres: queue depths through
// River's client, and the approvals waiting.
type stateCollector struct {
	river *river.Client[pgx.Tx]
	db    *db.DB
	log   *slog.Logger
}

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepth
	ch <- queueOldest
	ch <- approvalsWaiting
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	queues := []string{jobs.QueueDefault, run.QueueChat, jobs.QueueMaintenance}
	if res, err := c.river.QueueList(ctx, river.NewQueueListParams().First(100)); err == nil {
		for _, q := range res.Queues {
			if !slices.Contains(queues, q.Name) {
				queues = append(queues, q.Name)
			}
		}
	}
	now := time.Now()
	for _, q := range queues {
		res, err := c.river.JobList(ctx, river.NewJobListParams().Queues(q).States(rivertype.JobStateAvailable).
			OrderBy(river.JobListOrderByScheduledAt, river.SortOrderAsc).First(QueueDepthCap))
		if err != nil {
			c.log.WarnContext(ctx, "metrics: list queue", slog.String("queue", q), slog.Any("error", err))
			continue
		}
		age := 0.0
		if len(res.Jobs) > 0 {
			age = max(now.Sub(res.Jobs[0].ScheduledAt).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(queueDepth, prometheus.GaugeValue, float64(len(res.Jobs)), q)
		ch <- prometheus.MustNewConstMetric(queueOldest, prometheus.GaugeValue, age, q)
	}
	var waiting int64
	err := c.db.InSystemTx(ctx, "metrics: approvals waiting across every tenant", func(ctx context.Context, tx *db.Tx) error {
		var err error
		waiting, err = tx.Q.ApprovalCountPending(ctx)
		return err
	})
	if err != nil {
		c.log.WarnContext(ctx, "metrics: count approvals", slog.Any("error", err))
		return
	}
	ch <- prometheus.MustNewConstMetric(approvalsWaiting, prometheus.GaugeValue, float64(waiting))
}
