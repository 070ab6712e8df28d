package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/db"
)

// counts is a snapshot of the counters COUNTERS compares.
type counts struct {
	at          time.Time
	commits     int64 // pg_stat_database.xact_commit of the bench database
	publishInfo int64 // INFO commandstats cmdstat_publish calls (the whole Redis server)
	publishOwn  int64 // PUBLISH commands sent by agentry's Redis client
	commandsOwn int64 // every command sent by agentry's Redis client
}

// counters reads the counters once Postgres has published every backend's statistics.
//
// Backends report their transaction counts at most once a second, when idle (Postgres 15); so
// it waits a little over a second, then runs one query on each idle connection of agentry's
// pools, which makes each backend flush, and subtracts those queries.
func (e *env) counters(ctx context.Context) (counts, error) {
	var c counts
	touched := e.flushStats(ctx)
	admin, err := pgx.Connect(ctx, e.adminDB)
	if err != nil {
		return c, err
	}
	defer admin.Close(ctx)
	c.at = time.Now()
	if err := admin.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", e.dbName).Scan(&c.commits); err != nil {
		return c, fmt.Errorf("pg_stat_database: %w", err)
	}
	c.commits -= int64(touched)
	if c.publishInfo, err = e.redisCalls(ctx, "publish"); err != nil {
		return c, err
	}
	c.publishOwn = e.redisHook.publish.Load()
	c.commandsOwn = e.redisHook.commands.Load()
	return c, nil
}

// flushStats waits a little over a second and runs one query on each idle connection of
// agentry's pools (its own and River's), so that every backend has reported its statistics
// (see counters). It returns the queries it ran.
func (e *env) flushStats(ctx context.Context) int {
	time.Sleep(1100 * time.Millisecond)
	touched := 0
	for _, d := range []*db.DB{e.app.DB, e.app.Queue} {
		for _, conn := range d.Pool.AcquireAllIdle(ctx) {
			if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
				touched++
			}
			conn.Release()
		}
	}
	return touched
}

// redisCalls reads the calls of a command from INFO commandstats.
func (e *env) redisCalls(ctx context.Context, cmd string) (int64, error) {
	info, err := e.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO commandstats: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return 0, nil
}

// budgetWrites returns the rows written (inserted, updated, deleted) so far in the budgets and
// budget_stripes tables (a budget's counters live in its stripes), in the reservations table, and
// the usage records inserted (one per LLM call).
func (e *env) budgetWrites(ctx context.Context) ([3]int64, error) {
	var n [3]int64
	e.flushStats(ctx)
	err := e.owner.QueryRow(ctx, `SELECT
		coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del) FILTER (WHERE relname IN ('budgets', 'budget_stripes')), 0)::bigint,
		coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del) FILTER (WHERE relname = 'reservations'), 0)::bigint,
		coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'usage_records'), 0)::bigint
		FROM pg_stat_user_tables WHERE relname IN ('budgets', 'budget_stripes', 'reservations', 'usage_records')`).Scan(&n[0], &n[1], &n[2])
	return n, err
}

// walBytes is where the cluster's write-ahead log stands, in bytes (every database's writes,
// this bench's nearly all).
func (e *env) walBytes(ctx context.Context) (int64, error) {
	var n int64
	err := e.owner.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&n)
	return n, err
}

// commandCounter counts the commands a Redis client sends.
type commandCounter struct {
	publish, commands atomic.Int64
}

func (h *commandCounter) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		h.commands.Add(1)
		if strings.EqualFold(c.Name(), "publish") {
			h.publish.Add(1)
		}
	}
}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*commandCounter)(nil)
