package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/db"
)

// poolCollector exports Postgres and Redis pool statistics.
type poolCollector struct {
	db    *db.DB
	redis *redis.Client
}

var (
	pgConns     = prometheus.NewDesc("agentry_pg_pool_connections", "Postgres pool connections by state.", []string{"state"}, nil)
	pgAcquires  = prometheus.NewDesc("agentry_pg_pool_acquires_total", "Postgres pool acquisitions.", nil, nil)
	pgWaits     = prometheus.NewDesc("agentry_pg_pool_empty_acquires_total", "Acquisitions that waited for a connection.", nil, nil)
	pgWaitSecs  = prometheus.NewDesc("agentry_pg_pool_acquire_wait_seconds_total", "Time spent waiting for connections.", nil, nil)
	redisConns  = prometheus.NewDesc("agentry_redis_pool_connections", "Redis pool connections by state.", []string{"state"}, nil)
	redisMisses = prometheus.NewDesc("agentry_redis_pool_misses_total", "Redis pool misses (new connections).", nil, nil)
	redisWaits  = prometheus.NewDesc("agentry_redis_pool_timeouts_total", "Redis pool wait timeouts.", nil, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pgConns, pgAcquires, pgWaits, pgWaitSecs, redisConns, redisMisses, redisWaits} {
		ch <- d
	}
}

func (p poolCollector) Collect(ch chan<- prometheus.Metric) {
	var acquired, idle, maxConns, acquires, waits int64
	var waited time.Duration
	for _, s := range p.db.Stats() {
		acquired, idle, maxConns = acquired+int64(s.AcquiredConns()), idle+int64(s.IdleConns()), maxConns+int64(s.MaxConns())
		acquires, waits, waited = acquires+s.AcquireCount(), waits+s.EmptyAcquireCount(), waited+s.AcquireDuration()
	}
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(acquired), "acquired")
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(idle), "idle")
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(maxConns), "max")
	ch <- prometheus.MustNewConstMetric(pgAcquires, prometheus.CounterValue, float64(acquires))
	ch <- prometheus.MustNewConstMetric(pgWaits, prometheus.CounterValue, float64(waits))
	ch <- prometheus.MustNewConstMetric(pgWaitSecs, prometheus.CounterValue, waited.Seconds())
	r := p.redis.PoolStats()
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.TotalConns-r.IdleConns), "in_use")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(redisMisses, prometheus.CounterValue, float64(r.Misses))
	ch <- prometheus.MustNewConstMetric(redisWaits, prometheus.CounterValue, float64(r.Timeouts))
}
