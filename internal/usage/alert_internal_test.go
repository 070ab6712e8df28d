package usage

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestRunawayCheckOncePerInterval: a tenant's runaway check is due at most once per
// RunawayInterval whatever loop asks (kickAlerts starts a loop per settlement when they are
// more than AlertInterval apart), and each tenant has its own.
func TestRunawayCheckOncePerInterval(t *testing.T) {
	var a alerts
	t0 := time.Now()
	one, two := uuid.New(), uuid.New()
	require.True(t, a.runawayDue(one, t0))
	for _, d := range []time.Duration{0, time.Second, 2 * time.Second, RunawayInterval - time.Millisecond} {
		require.False(t, a.runawayDue(one, t0.Add(d)), "asked again after %s", d)
	}
	require.True(t, a.runawayDue(two, t0.Add(time.Second)), "another tenant's check is its own")
	require.True(t, a.runawayDue(one, t0.Add(RunawayInterval)))
	require.False(t, a.runawayDue(one, t0.Add(RunawayInterval+time.Second)))
}
