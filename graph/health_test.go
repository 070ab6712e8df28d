package graph_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// TestPlatformHealth: platformHealth lists Postgres, Redis and River's leader with status and
// latency for a platform admin (the leader shows UP once the worker has been elected), and is
// FORBIDDEN to a tenant's OWNER; /readyz of the working process names the same dependencies.
func TestPlatformHealth(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{})
	s := e.SignUp(t, "", "")
	const q = `{ platformHealth { name status latencyMs error } }`
	res := e.Do(t, s.AccessToken, q, nil)
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)

	_, err := e.App.Tenancy.GrantPlatformAdmin(context.Background(), s.Email, true)
	require.NoError(t, err)
	c := &chatEnv{Env: e, s: s}
	admin := c.logIn(t, s.Email, s.Password, s.TenantID)
	type component struct {
		Name, Status string
		LatencyMs    float64
		Error        *string
	}
	var out struct{ PlatformHealth []component }
	require.Eventually(t, func() bool {
		e.Do(t, admin, q, nil).Decode(t, &out)
		for _, c := range out.PlatformHealth {
			if c.Status != "UP" {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "%+v", out)
	names := []string{}
	for _, c := range out.PlatformHealth {
		names = append(names, c.Name)
		require.Nil(t, c.Error)
		require.Positive(t, c.LatencyMs)
	}
	require.Equal(t, []string{"postgres", "redis", "river_leader"}, names)

	rec := httptest.NewRecorder()
	e.App.Health.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var body map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, map[string]string{"postgres": "ok", "redis": "ok", "river_leader": "ok"}, body)
}

// TestPlatformHealthNamesMissingLeader: with no worker running, River has no leader:
// platformHealth says river_leader is DOWN and why, while the API-only process stays ready.
func TestPlatformHealthNamesMissingLeader(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true})
	s := e.SignUp(t, "", "")
	_, err := e.App.Tenancy.GrantPlatformAdmin(context.Background(), s.Email, true)
	require.NoError(t, err)
	admin := (&chatEnv{Env: e, s: s}).logIn(t, s.Email, s.Password, s.TenantID)
	var out struct {
		PlatformHealth []struct {
			Name, Status string
			Error        *string
		}
	}
	e.Do(t, admin, `{ platformHealth { name status error } }`, nil).Decode(t, &out)
	require.Len(t, out.PlatformHealth, 3)
	leader := out.PlatformHealth[2]
	require.Equal(t, "river_leader", leader.Name)
	require.Equal(t, "DOWN", leader.Status)
	require.Contains(t, *leader.Error, "no River leader")
	require.Equal(t, "UP", out.PlatformHealth[0].Status)

	rec := httptest.NewRecorder()
	e.App.Health.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}
