package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// TestBenchHarness runs every measure with tiny windows against the test Postgres and Redis:
// the harness must set up, measure both sides of every check and tear down. Whether the goals
// pass depends on the machine, so it checks the figures, not the verdicts.
func TestBenchHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole agentry against Postgres and Redis (about 20 s)")
	}
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	// Its pools are a test's (dbtest.PoolSize), so it fits beside the rest of the suite.
	rep, err := Run(ctx, Options{DatabaseURL: dbtest.PoolURL(dbURL), RedisURL: redisURL, Quick: true, Window: 0.1, Tenants: 2,
		Clients: 8, Subscribers: []int{1, 10}, Progress: &progress})
	require.NoError(t, err, "progress:\n%s", progress.String())
	t.Log(progress.String())
	// The bench's sign-ups send verification mail to a sender that drops it: no warning about
	// email reaches the report.
	require.NotContains(t, strings.ToLower(progress.String()), "email", "progress:\n%s", progress.String())

	measures := map[string]bool{}
	for _, c := range rep.Checks {
		measures[c.Measure] = true
		require.Contains(t, []string{"pass", "fail"}, c.Status, "%s: %+v", c.Name, c)
		require.False(t, math.IsNaN(c.Agentry) || c.Agentry < 0, "%s: agentry figure %v", c.Name, c.Agentry)
		if c.Measure != "COUNTERS" {
			require.False(t, math.IsNaN(c.Baseline) || c.Baseline <= 0, "%s: baseline figure %v", c.Name, c.Baseline)
		}
		require.NotContains(t, c.Note, "failed:", "%s", c.Name)
	}
	for _, m := range []string{"Q-LAT", "E2E-TPUT", "TTFT-ADD", "TOK-TPUT", "GQL-TPUT", "FANOUT", "BUDGET", "COUNTERS", "HISTORY"} {
		require.True(t, measures[m], "no check of %s", m)
	}

	var table bytes.Buffer
	PrintTable(&table, rep)
	require.Contains(t, table.String(), "E2E-TPUT")
	// Without autovacuum the bench does its work before each round, and says so.
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	on, err := db.AutovacuumOn(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, on, rep.Machine.Autovacuum)
	require.Equal(t, !on, strings.Contains(progress.String(), "autovacuum's work"), "progress:\n%s", progress.String())
	require.Equal(t, !on, strings.Contains(table.String(), "without autovacuum"), "table:\n%s", table.String())

	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	require.True(t, strings.Contains(string(raw), `"checks"`))
}

// TestScaleHarness runs the scale measures with a few connections: SUBS-CHURN reports the heap
// and the goroutines before and after.
func TestScaleHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole agentry against Postgres and Redis")
	}
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{DatabaseURL: dbURL, RedisURL: redisURL, Quick: true, ScaleMeasures: true, Connections: 300,
		Tenants: 1, Progress: &progress})
	require.NoError(t, err, "progress:\n%s", progress.String())
	var names []string
	for _, c := range rep.Checks {
		require.Equal(t, "SUBS-CHURN", c.Measure)
		require.Positive(t, c.Baseline, "%s", c.Name)
		require.Positive(t, c.Agentry, "%s", c.Name)
		require.Contains(t, []string{"pass", "fail"}, c.Status)
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"SUBS-CHURN heap", "SUBS-CHURN goroutines"}, names)
}
