package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Delivery limits.
const (
	// Timeout bounds one attempt: connecting, sending and reading the answer.
	Timeout = 10 * time.Second
	// MaxResponseRead is how much of an answer's body is read (and then dropped).
	MaxResponseRead = 64 << 10
	// MaxRetries is how many times a failed delivery is tried again; after the last it is FAILED.
	MaxRetries = 5
	// MaxRetryDelay caps the doubling delay between attempts.
	MaxRetryDelay = time.Hour
)

// Queue is the River queue deliveries run on.
const Queue = "webhooks"

// Headers of a delivery.
const (
	HeaderSignature = "Agentry-Signature" // v1=<hex HMAC-SHA256 of "<timestamp>.<body>">
	HeaderTimestamp = "Agentry-Timestamp" // Unix seconds when the attempt was signed
	HeaderEvent     = "Agentry-Event"     // the event's type
	HeaderDelivery  = "Agentry-Delivery"  // the delivery's id: the same on every attempt
)

// Sign returns the Agentry-Signature value of body sent at timestamp (Unix seconds) under
// secret.
func Sign(secret []byte, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// DeliverArgs delivers one stored delivery.
type DeliverArgs struct {
	TenantID   uuid.UUID `json:"tenant_id"`
	DeliveryID uuid.UUID `json:"delivery_id"`
}

// Kind names the job.
func (DeliverArgs) Kind() string { return "webhook_deliver" }

// InsertOpts: the webhooks queue, the first attempt and MaxRetries more.
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxRetries + 1}
}

// Worker works DeliverArgs.
type Worker struct {
	river.WorkerDefaults[DeliverArgs]
	s      *Service
	client *http.Client
}

// NewWorker returns the delivery worker of s.
func NewWorker(s *Service) *Worker {
	return &Worker{s: s, client: s.httpClient()}
}

// Timeout leaves the attempt's own deadline (Timeout) to the HTTP client, with room to record it.
func (w *Worker) Timeout(*river.Job[DeliverArgs]) time.Duration { return Timeout + 20*time.Second }

// NextRetry doubles from the service's base delay: base, 2x, 4x, ... at most MaxRetryDelay.
func (w *Worker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	return time.Now().Add(RetryDelay(w.s.o.RetryBase, job.Attempt))
}

// RetryDelay is the wait after failed attempt number attempt (1-based).
func RetryDelay(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < MaxRetryDelay; i++ {
		d *= 2
	}
	return min(d, MaxRetryDelay)
}

// errRefused marks an address a production webhook may not reach.
var errRefused = errors.New("refused: the address is not public (loopback, private, link-local or reserved)")

// Work sends the delivery once and records the attempt. A failure is returned to River, which
// tries again after NextRetry until the attempts are used up; a refused address fails at once.
func (w *Worker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	a := job.Args
	var d dbsqlc.WebhookDelivery
	var hook dbsqlc.Webhook
	err := w.s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		if d, err = tx.Q.WebhookDeliveryGet(ctx, dbsqlc.WebhookDeliveryGetParams{TenantID: a.TenantID, ID: a.DeliveryID}); err != nil {
			return err
		}
		hook, err = tx.Q.WebhookGet(ctx, dbsqlc.WebhookGetParams{TenantID: a.TenantID, ID: d.WebhookID})
		return err
	})
	if db.IsNoRows(err) {
		return nil // the webhook was deleted with its deliveries
	}
	if err != nil {
		return err
	}
	if d.Status != StatusPending {
		return nil
	}
	secret, err := w.s.o.Sealer.Open(hook.SecretSealed, hook.ID[:])
	if err != nil {
		return fmt.Errorf("open webhook secret: %w", err)
	}
	start := time.Now()
	code, sendErr := w.send(ctx, hook.Url, secret, d)
	dur := int32(time.Since(start).Milliseconds())
	status := StatusPending
	refused := errors.Is(sendErr, errRefused)
	switch {
	case sendErr == nil:
		status = StatusDelivered
	case refused || job.Attempt >= job.MaxAttempts:
		status = StatusFailed
	}
	p := dbsqlc.WebhookDeliveryRecordParams{TenantID: a.TenantID, ID: d.ID, Status: status, DurationMs: &dur}
	if code > 0 {
		c := int32(code)
		p.ResponseCode = &c
	}
	if sendErr != nil {
		msg := sendErr.Error()
		p.Error = &msg
	}
	if err := w.s.o.DB.InTx(context.WithoutCancel(ctx), a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.WebhookDeliveryRecord(ctx, p)
		return err
	}); err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	switch {
	case sendErr == nil:
		w.s.o.Metrics.WebhookDelivery("delivered")
		return nil
	case refused:
		w.s.o.Metrics.WebhookDelivery("refused")
		return river.JobCancel(sendErr)
	}
	w.s.o.Metrics.WebhookDelivery("failed")
	return sendErr
}

// send POSTs the delivery's payload; a 2xx answer is success, anything else an error. code is
// the answer's status (0 when there was none).
func (w *Worker) send(ctx context.Context, url string, secret []byte, d dbsqlc.WebhookDelivery) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errRefused, err)
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentry-webhooks/1")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, d.Payload))
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderDelivery, globalID("WebhookDelivery", d.ID))
	res, err := w.client.Do(req)
	if err != nil {
		if errors.Is(err, errRefused) {
			return 0, errRefused
		}
		return 0, fmt.Errorf("post: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, MaxResponseRead))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, fmt.Errorf("answered %d", res.StatusCode)
	}
	return res.StatusCode, nil
}

// httpClient never follows redirects (a 3xx is a failed attempt), uses no proxy, and in
// production refuses, at dial time, every address that is not public: the check is on the IP
// actually dialled, so a name that resolves (or re-resolves) to 127.0.0.1 is refused too.
func (s *Service) httpClient() *http.Client {
	dialer := &net.Dialer{Timeout: Timeout}
	if s.o.Production {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return errRefused
			}
			ip, err := netip.ParseAddr(host)
			if err != nil || !Public(ip) {
				return errRefused
			}
			return nil
		}
	}
	return &http.Client{
		Timeout: Timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   Timeout,
			ResponseHeaderTimeout: Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Public reports whether ip is a public unicast address: not loopback, private (RFC 1918, ULA),
// link-local, multicast, unspecified, shared (100.64/10) or otherwise reserved.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
		return false
	}
	if ip.Is4() {
		b := ip.As4()
		if b[0] == 0 || b[0] >= 240 || cgnat.Contains(ip) || (b[0] == 192 && b[1] == 0 && b[2] == 0) || (b[0] == 198 && (b[1] == 18 || b[1] == 19)) {
			return false
		}
	}
	return true
}
