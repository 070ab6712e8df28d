package app

import (
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
	s := p.db.Pool.Stat()
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(pgConns, prometheus.GaugeValue, float64(s.MaxConns()), "max")
	ch <- prometheus.MustNewConstMetric(pgAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(pgWaits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(pgWaitSecs, prometheus.CounterValue, s.AcquireDuration().Seconds())
	r := p.redis.PoolStats()
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.TotalConns-r.IdleConns), "in_use")
	ch <- prometheus.MustNewConstMetric(redisConns, prometheus.GaugeValue, float64(r.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(redisMisses, prometheus.CounterValue, float64(r.Misses))
	ch <- prometheus.MustNewConstMetric(redisWaits, prometheus.CounterValue, float64(r.Timeouts))
}
