package graph_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/server"
)

// TestJobsUI: the River UI answers a platform admin at /admin/jobs (by the admin cookie or a
// bearer token) and its API lists the chat queue's jobs; a tenant's OWNER and an anonymous
// client get 404 for the page and the API; a cross-origin change is refused.
func TestJobsUI(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true}) // the turn's job stays available
	c := &chatEnv{Env: e}
	c.s = e.SignUp(t, "", "")
	s, _ := c.send(t, c.conversation(t, nil), "hello", nil)
	require.NotEmpty(t, s.RunID)
	owner := c.s.AccessToken
	_, err := e.App.Tenancy.GrantPlatformAdmin(context.Background(), c.s.Email, true)
	require.NoError(t, err)
	admin := c.logIn(t, c.s.Email, c.s.Password, c.s.TenantID)

	get := func(path, cookie, bearer string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, e.Server.URL+path, nil)
		require.NoError(t, err)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: server.AdminCookie, Value: cookie})
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := e.Server.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	const api = "/admin/jobs/api/jobs?state=available&queues=chat"
	for _, path := range []string{"/admin/jobs", "/admin/jobs/", "/admin/jobs/queues", api} {
		code, _ := get(path, "", "")
		require.Equal(t, http.StatusNotFound, code, "anonymous %s", path)
		code, _ = get(path, owner, "")
		require.Equal(t, http.StatusNotFound, code, "owner's cookie %s", path)
		code, _ = get(path, "", owner)
		require.Equal(t, http.StatusNotFound, code, "owner's token %s", path)
		code, _ = get(path, "not-a-token", "")
		require.Equal(t, http.StatusNotFound, code, "bad cookie %s", path)
	}

	code, page := get("/admin/jobs/", admin, "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, strings.ToLower(page), "<html")
	code, body := get(api, admin, "")
	require.Equal(t, http.StatusOK, code, body)
	var list struct {
		Data []struct {
			Kind, Queue, State string
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.NotEmpty(t, list.Data, body)
	for _, j := range list.Data {
		require.Equal(t, "chat", j.Queue)
		require.Equal(t, "run", j.Kind)
	}
	code, _ = get(api, "", admin)
	require.Equal(t, http.StatusOK, code, "a bearer token works too")

	req, err := http.NewRequest(http.MethodPost, e.Server.URL+"/admin/jobs/api/jobs/cancel", strings.NewReader(`{"ids":["1"]}`))
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: server.AdminCookie, Value: admin})
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Content-Type", "application/json")
	res, err := e.Server.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}
