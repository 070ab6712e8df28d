package graph_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/webhook"
)

const whSecret = "0123456789abcdef0123456789abcdef-secret"

// receiver is a local webhook endpoint that records what it gets and answers with status(n)
// for the n-th request (0-based).
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	code func(n int) int
}

type received struct {
	at     time.Time
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, tls bool, code func(n int) int) *receiver {
	r := &receiver{code: code}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, received{at: time.Now(), header: req.Header.Clone(), body: body})
		r.mu.Unlock()
		w.WriteHeader(r.code(n))
	})
	if tls {
		r.Server = httptest.NewTLSServer(h)
	} else {
		r.Server = httptest.NewServer(h)
	}
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func createWebhook(t *testing.T, e *apptest.Env, token, url string, events []string) (string, *apptest.Response) {
	t.Helper()
	res := e.Do(t, token, `mutation($in: CreateWebhookInput!) { createWebhook(input: $in) { id url events active } }`,
		map[string]any{"in": map[string]any{"url": url, "events": events, "secret": whSecret}})
	if len(res.Errors) > 0 {
		return "", res
	}
	var out struct{ CreateWebhook struct{ ID string } }
	res.Decode(t, &out)
	return out.CreateWebhook.ID, res
}

type deliveryView struct {
	ID, Event, Status string
	Attempts          int
	ResponseCode      *int
	DurationMs        *int
	Error             *string
}

func deliveries(t *testing.T, e *apptest.Env, token string) []deliveryView {
	t.Helper()
	var out struct {
		Webhooks []struct{ Deliveries []deliveryView }
	}
	e.Do(t, token, `{ webhooks { deliveries(first: 50) { id event status attempts responseCode durationMs error } } }`, nil).Decode(t, &out)
	var all []deliveryView
	for _, w := range out.Webhooks {
		all = append(all, w.Deliveries...)
	}
	return all
}

// TestWebhookDeliversSignedEvent: a turn's execution.completed reaches a local receiver once,
// signed with the webhook's secret over "<timestamp>.<body>", with the event and delivery
// headers; the delivery log says DELIVERED after one attempt with the receiver's 200.
func TestWebhookDeliversSignedEvent(t *testing.T) {
	t.Parallel()
	c := &chatEnv{Env: apptest.Start(t, apptest.Options{})}
	c.s = c.SignUp(t, "", "")
	rcv := newReceiver(t, false, func(int) int { return http.StatusOK })
	_, res := createWebhook(t, c.Env, c.s.AccessToken, rcv.URL+"/hook", []string{"execution.completed"})
	require.Empty(t, res.Errors, "%s", res.Body)

	s, _ := c.send(t, c.conversation(t, nil), "help", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 20*time.Second).Status)
	require.Eventually(t, func() bool { return len(rcv.requests()) == 1 }, 20*time.Second, 20*time.Millisecond)
	got := rcv.requests()[0]
	require.Equal(t, "execution.completed", got.header.Get(webhook.HeaderEvent))
	ts, err := strconv.ParseInt(got.header.Get(webhook.HeaderTimestamp), 10, 64)
	require.NoError(t, err)
	require.LessOrEqual(t, time.Since(time.Unix(ts, 0)), 5*time.Minute, "a receiver rejects older timestamps")
	require.Equal(t, webhook.Sign([]byte(whSecret), ts, got.body), got.header.Get(webhook.HeaderSignature))
	require.NotEqual(t, webhook.Sign([]byte("another secret of at least 32 bytes!!"), ts, got.body), got.header.Get(webhook.HeaderSignature))
	var p webhook.Payload
	require.NoError(t, json.Unmarshal(got.body, &p))
	require.Equal(t, "execution.completed", p.Type)
	require.Equal(t, s.RunID, p.RunID)
	require.Equal(t, c.s.TenantID, p.TenantID)
	require.Equal(t, p.ID, got.header.Get(webhook.HeaderDelivery))

	require.Eventually(t, func() bool {
		ds := deliveries(t, c.Env, c.s.AccessToken)
		return len(ds) == 1 && ds[0].Status == "DELIVERED"
	}, 10*time.Second, 20*time.Millisecond)
	d := deliveries(t, c.Env, c.s.AccessToken)[0]
	require.Equal(t, 1, d.Attempts)
	require.Equal(t, 200, *d.ResponseCode)
	require.Equal(t, p.ID, d.ID)
	require.Nil(t, d.Error)
	require.Len(t, rcv.requests(), 1, "other event types are not delivered")
}

// TestWebhookRetriesWithBackoff: a receiver that fails three times gets the test event on the
// fourth attempt, each wait at least twice the one before (base delay injected: 100 ms); the
// delivery log shows the four attempts.
func TestWebhookRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{Env: map[string]string{"AGENTRY_WEBHOOK_RETRY_BASE": "100ms"}})
	s := e.SignUp(t, "", "")
	rcv := newReceiver(t, false, func(n int) int {
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	id, res := createWebhook(t, e, s.AccessToken, rcv.URL, []string{"*"})
	require.Empty(t, res.Errors, "%s", res.Body)
	var tw struct{ TestWebhook deliveryView }
	e.Do(t, s.AccessToken, `mutation($id: ID!) { testWebhook(id: $id) { id event status attempts } }`, map[string]any{"id": id}).Decode(t, &tw)
	require.Equal(t, "PENDING", tw.TestWebhook.Status)
	require.Equal(t, webhook.TestEvent, tw.TestWebhook.Event)

	require.Eventually(t, func() bool {
		ds := deliveries(t, e, s.AccessToken)
		return len(ds) == 1 && ds[0].Status == "DELIVERED"
	}, 30*time.Second, 20*time.Millisecond)
	got := rcv.requests()
	require.Len(t, got, 4)
	for i := 1; i < 4; i++ {
		gap := got[i].at.Sub(got[i-1].at)
		require.GreaterOrEqual(t, gap, 100*time.Millisecond<<(i-1), "wait before attempt %d", i+1)
		require.Equal(t, got[0].header.Get(webhook.HeaderDelivery), got[i].header.Get(webhook.HeaderDelivery), "one delivery id on every attempt")
	}
	d := deliveries(t, e, s.AccessToken)[0]
	require.Equal(t, 4, d.Attempts)
	require.Equal(t, 204, *d.ResponseCode)
	require.Equal(t, tw.TestWebhook.ID, d.ID)
}

// TestWebhookRedirectNotFollowed: a receiver answering 302 to another URL is a failed attempt;
// the other URL is never called.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{Env: map[string]string{"AGENTRY_WEBHOOK_RETRY_BASE": "1h"}})
	s := e.SignUp(t, "", "")
	target := newReceiver(t, false, func(int) int { return http.StatusOK })
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/stolen", http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	id, res := createWebhook(t, e, s.AccessToken, redirect.URL, []string{"*"})
	require.Empty(t, res.Errors, "%s", res.Body)
	e.Do(t, s.AccessToken, `mutation($id: ID!) { testWebhook(id: $id) { id } }`, map[string]any{"id": id}).Decode(t, &struct{}{})
	require.Eventually(t, func() bool {
		ds := deliveries(t, e, s.AccessToken)
		return len(ds) == 1 && ds[0].Attempts == 1
	}, 20*time.Second, 20*time.Millisecond)
	d := deliveries(t, e, s.AccessToken)[0]
	require.Equal(t, "PENDING", d.Status, "retried later (in an hour)")
	require.Equal(t, 302, *d.ResponseCode)
	require.Empty(t, target.requests(), "the redirect was followed")
}

// TestWebhookSSRFRefusedInProduction: in production a webhook must be https, and one whose host
// resolves to a loopback address is refused when it is dialled: the delivery fails at once and
// the local server never hears of it.
func TestWebhookSSRFRefusedInProduction(t *testing.T) {
	t.Parallel()
	c := newChatEnvWith(t, "anthropic", map[string]string{"AGENTRY_ENV": "production", "AGENTRY_DEFAULT_MODEL": "anthropic:claude-sonnet-4-5"})
	local := newReceiver(t, true, func(int) int { return http.StatusOK })
	_, res := createWebhook(t, c.Env, c.s.AccessToken, "http://example.com/hook", []string{"*"})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)

	// localhost resolves to 127.0.0.1 (or ::1): only the dialled address tells.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(local.URL, "https://"))
	id, res := createWebhook(t, c.Env, c.s.AccessToken, "https://localhost:"+port+"/hook", []string{"*"})
	require.Empty(t, res.Errors, "%s", res.Body)
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { testWebhook(id: $id) { id } }`, map[string]any{"id": id}).Decode(t, &struct{}{})
	require.Eventually(t, func() bool {
		ds := deliveries(t, c.Env, c.s.AccessToken)
		return len(ds) == 1 && ds[0].Status == "FAILED"
	}, 20*time.Second, 20*time.Millisecond)
	d := deliveries(t, c.Env, c.s.AccessToken)[0]
	require.Equal(t, 1, d.Attempts, "a refused address is not retried")
	require.Nil(t, d.ResponseCode)
	require.Contains(t, *d.Error, "refused")
	require.Empty(t, local.requests())
}

// TestWebhookValidationAndAccess: bad input is BAD_USER_INPUT; members cannot manage webhooks;
// another tenant's webhook is NOT_FOUND; the secret is never returned.
func TestWebhookValidationAndAccess(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, apptest.Options{NoWork: true})
	a := e.SignUp(t, "", "")
	b := e.SignUp(t, "", "")
	for _, in := range []map[string]any{
		{"url": "https://example.com/h", "events": []string{"*"}, "secret": "short"},
		{"url": "ftp://example.com/h", "events": []string{"*"}, "secret": whSecret},
		{"url": "https://user:pw@example.com/h", "events": []string{"*"}, "secret": whSecret},
		{"url": "https://example.com/h", "events": []string{}, "secret": whSecret},
		{"url": "https://example.com/h", "events": []string{"Execution Completed"}, "secret": whSecret},
	} {
		res := e.Do(t, a.AccessToken, `mutation($in: CreateWebhookInput!) { createWebhook(input: $in) { id } }`, map[string]any{"in": in})
		require.Equal(t, "BAD_USER_INPUT", res.Code(), "%v: %s", in, res.Body)
	}
	id, res := createWebhook(t, e, a.AccessToken, "https://example.com/h", []string{"execution.*", "budget.*", "approval.requested"})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.NotContains(t, string(res.Body), whSecret)

	for _, q := range []string{`mutation($id: ID!) { deleteWebhook(id: $id) }`, `mutation($id: ID!) { testWebhook(id: $id) { id } }`} {
		res = e.Do(t, b.AccessToken, q, map[string]any{"id": id})
		require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	}
	var list struct{ Webhooks []struct{ ID string } }
	e.Do(t, b.AccessToken, `{ webhooks { id } }`, nil).Decode(t, &list)
	require.Empty(t, list.Webhooks)
	res = e.Do(t, b.AccessToken, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": id})
	requireNodeNull(t, res, "another tenant's webhook")

	var del struct{ DeleteWebhook bool }
	e.Do(t, a.AccessToken, `mutation($id: ID!) { deleteWebhook(id: $id) }`, map[string]any{"id": id}).Decode(t, &del)
	require.True(t, del.DeleteWebhook)
}
