package graph_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

const setPlan = `mutation($in: SetPlanInput!) { setPlan(input: $in) { name subagentsRunningMax spendRate spendBurst } }`

// plan is a Plan as setPlan and plans answer it.
type plan struct {
	Name                                       string
	SubagentsRunningMax, SpendRate, SpendBurst int
}

// TestSetPlanChangesSpendLimit: the spend limit enforced on a tenant is its plan's row. A
// platform admin makes a plan allowing bursts of 2 spending mutations and puts the tenant on
// it: sendMessage is soon RATE_LIMITED. Raising the plan's burst through setPlan lets the
// next one through; a setPlan that leaves the spend limits out keeps them.
func TestSetPlanChangesSpendLimit(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_RATE_LIMIT_SPEND": ""}}) // the plans' own limits
	const setTenantPlan = `mutation($t: ID!, $p: String!) { setTenantPlan(tenantId: $t, plan: $p) { id plan } }`
	name := "tight-" + uuid.NewString()[:8]
	require.Equal(t, "FORBIDDEN", c.Do(t, c.s.AccessToken, setPlan, map[string]any{"in": map[string]any{"name": name, "subagentsRunningMax": 8, "spendBurst": 1000}}).Code())
	admin := c.platformAdmin(t)
	for _, bad := range []map[string]any{{"spendRate": 0}, {"spendBurst": 100_001}, {"spendRate": -1}} {
		in := map[string]any{"name": name, "subagentsRunningMax": 8}
		for k, v := range bad {
			in[k] = v
		}
		require.Equal(t, "BAD_USER_INPUT", c.Do(t, admin, setPlan, map[string]any{"in": in}).Code(), "%v", bad)
	}
	var out struct{ SetPlan plan }
	res := c.Do(t, admin, setPlan, map[string]any{"in": map[string]any{"name": name, "subagentsRunningMax": 8, "spendRate": 1, "spendBurst": 2}})
	require.Empty(t, res.Errors, "%s", res.Body)
	res.Decode(t, &out)
	require.Equal(t, plan{Name: name, SubagentsRunningMax: 8, SpendRate: 1, SpendBurst: 2}, out.SetPlan)
	res = c.Do(t, admin, setTenantPlan, map[string]any{"t": c.s.TenantID, "p": name})
	require.Empty(t, res.Errors, "%s", res.Body)

	// Sent one after another, the plan's bursts of 2 at 1 a second refuse one long before 20
	// (free's burst, which would let all 20 through).
	conv := c.conversation(t, nil)
	allowed := 0
	for ; allowed < 20; allowed++ {
		if _, res = c.send(t, conv, "hello", nil); len(res.Errors) > 0 {
			break
		}
	}
	require.Equal(t, "RATE_LIMITED", res.Code(), "the plan's limit applies: %s", res.Body)
	require.GreaterOrEqual(t, allowed, 2, "its burst of 2 went through")

	res = c.Do(t, admin, setPlan, map[string]any{"in": map[string]any{"name": name, "subagentsRunningMax": 8, "spendBurst": 100}})
	require.Empty(t, res.Errors, "%s", res.Body)
	res.Decode(t, &out)
	require.Equal(t, plan{Name: name, SubagentsRunningMax: 8, SpendRate: 1, SpendBurst: 100}, out.SetPlan, "the rate it left out is kept")
	_, res = c.send(t, conv, "hello", nil)
	require.Nil(t, res.Errors, "the raised burst applies: %s", res.Body)

	// Leaving the spend limits out keeps them.
	res = c.Do(t, admin, setPlan, map[string]any{"in": map[string]any{"name": name, "subagentsRunningMax": 4}})
	require.Empty(t, res.Errors, "%s", res.Body)
	res.Decode(t, &out)
	require.Equal(t, plan{Name: name, SubagentsRunningMax: 4, SpendRate: 1, SpendBurst: 100}, out.SetPlan)
	var plans struct{ Plans []plan }
	c.Do(t, admin, `{ plans { name subagentsRunningMax spendRate spendBurst } }`, nil).Decode(t, &plans)
	require.Contains(t, plans.Plans, plan{Name: "free", SubagentsRunningMax: 8, SpendRate: 10, SpendBurst: 20}, "free's seeded figures")
	require.Contains(t, plans.Plans, plan{Name: "enterprise", SubagentsRunningMax: 8, SpendRate: 200, SpendBurst: 400})
}

// TestSetPlanSpendDefaults: a plan created without spend limits gets the documented defaults
// (10 per second, bursts of 20: the plans table's column defaults), and a later setPlan that
// leaves them out keeps what an earlier one set instead of going back to the defaults.
func TestSetPlanSpendDefaults(t *testing.T) {
	t.Parallel()
	c := demoEnv(t, apptest.Options{NoWork: true})
	admin := c.platformAdmin(t)
	set := func(in map[string]any) plan {
		t.Helper()
		var out struct{ SetPlan plan }
		res := c.Do(t, admin, setPlan, map[string]any{"in": in})
		require.Empty(t, res.Errors, "%s", res.Body)
		res.Decode(t, &out)
		return out.SetPlan
	}
	name := "defaults-" + uuid.NewString()[:8]
	require.Equal(t, plan{Name: name, SubagentsRunningMax: 3, SpendRate: 10, SpendBurst: 20},
		set(map[string]any{"name": name, "subagentsRunningMax": 3}), "a new plan gets the defaults")
	require.Equal(t, plan{Name: name, SubagentsRunningMax: 3, SpendRate: 7, SpendBurst: 20},
		set(map[string]any{"name": name, "subagentsRunningMax": 3, "spendRate": 7}), "only the rate given changes")
	require.Equal(t, plan{Name: name, SubagentsRunningMax: 5, SpendRate: 7, SpendBurst: 20},
		set(map[string]any{"name": name, "subagentsRunningMax": 5}), "an update without spend limits keeps them")

	other := "given-" + uuid.NewString()[:8]
	require.Equal(t, plan{Name: other, SubagentsRunningMax: 2, SpendRate: 30, SpendBurst: 60},
		set(map[string]any{"name": other, "subagentsRunningMax": 2, "spendRate": 30, "spendBurst": 60}), "a new plan with its own limits")

	var plans struct{ Plans []plan }
	c.Do(t, admin, `{ plans { name subagentsRunningMax spendRate spendBurst } }`, nil).Decode(t, &plans)
	require.Contains(t, plans.Plans, plan{Name: name, SubagentsRunningMax: 5, SpendRate: 7, SpendBurst: 20}, "as stored")
	require.Contains(t, plans.Plans, plan{Name: other, SubagentsRunningMax: 2, SpendRate: 30, SpendBurst: 60})
}
