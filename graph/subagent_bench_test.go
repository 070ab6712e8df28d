package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/subagent"
)

// BenchmarkSubagentDispatch is the dispatcher's throughput (QUALITY.md's DISPATCH): 1,000
// sub-agents pending across 20 tenants (5 parents of 10 each per tenant), started by dispatcher
// passes under the Postgres-decided limits (the default plan's 8 per tenant, 5 per parent, 200 on
// the platform).
// Only the passes are timed: between two, the sub-agents a pass started are ended (untimed) so
// that the next pass has slots to give. It reports sub-agents started per second of passes.
// One iteration sets up and dispatches 1,000: run it with -benchtime=1x (or 3x).
func BenchmarkSubagentDispatch(b *testing.B) {
	const tenants, parents, each = 20, 5, 10
	c := demoEnv(b, apptest.Options{NoWork: true})
	ctx := context.Background()
	type tenant struct {
		ctx     context.Context
		parents []uuid.UUID
	}
	var ts []tenant
	for i := range tenants {
		env := c
		if i > 0 {
			env = &chatEnv{Env: c.Env, s: c.SignUp(b, "", "")}
		}
		a := auth.Actor{UserID: mustID(b, "User", env.s.UserID), TenantID: mustID(b, "Tenant", env.s.TenantID), Role: auth.RoleOwner}
		t := tenant{ctx: auth.WithActor(ctx, a)}
		for range parents {
			s, res := env.send(b, env.conversation(b, nil), "hello", nil) // QUEUED: nobody works it
			require.Empty(b, res.Errors, "%s", res.Body)
			t.parents = append(t.parents, mustID(b, "Run", s.RunID))
		}
		ts = append(ts, t)
	}
	var started int
	var spent time.Duration
	b.StopTimer()
	for range b.N {
		for _, t := range ts {
			for _, p := range t.parents {
				for k := range each {
					_, err := c.App.Subagents.SpawnFor(t.ctx, p, subagent.Spawn{Role: subagent.RoleGeneral, Goal: "go", Priority: 1 + k%10})
					require.NoError(b, err)
				}
			}
		}
		for left := tenants * parents * each; left > 0; {
			b.StartTimer()
			t0 := time.Now()
			n, err := c.App.Subagents.Dispatch(ctx)
			spent += time.Since(t0)
			b.StopTimer()
			require.NoError(b, err)
			require.Positive(b, n, "a pass started nothing with %d pending", left)
			left -= n
			started += n
			// The started ones end: their slots are free for the next pass.
			for _, s := range c.subagents(b) {
				if s.Status == "QUEUED" {
					require.NoError(b, c.App.Runs.CancelTree(ctx, tenantIDOf(b, c, s.ID), s.ID, "bench: done"))
				}
			}
		}
	}
	b.ReportMetric(float64(started)/spent.Seconds(), "subagents/s")
	b.ReportMetric(0, "ns/op")
}

// mustID decodes a global id of type typ.
func mustID(tb testing.TB, typ, id string) uuid.UUID {
	tb.Helper()
	u, err := model.DecodeID(typ, id)
	require.NoError(tb, err)
	return u
}
