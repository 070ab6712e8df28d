// Package webhook delivers a tenant's events to its own HTTP endpoints. A webhook names a URL,
// event type patterns and a secret; an event stored in a transaction (a run's execution.*,
// approval.*, budget.*) that matches a webhook's pattern gets a delivery row and a River job in
// that same transaction, so a committed event is never left undelivered. The job POSTs the
// event signed with HMAC-SHA256 and is retried by River with backoff; see docs/api/operations.md.
package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/status"
)

// Status is the status of a delivery.
type Status = status.WebhookDelivery

// Delivery statuses.
const (
	StatusPending   Status = "PENDING"
	StatusDelivered Status = "DELIVERED"
	StatusFailed    Status = "FAILED"
)

// TestEvent is the type of the event testWebhook sends.
const TestEvent = "webhook.test"

// MinSecretBytes is the shortest secret a webhook may have.
const MinSecretBytes = 32

// Sealer seals and opens stored secrets with the master key (auth.Keys).
type Sealer interface {
	Seal(plain, ad []byte) ([]byte, error)
	Open(sealed, ad []byte) ([]byte, error)
}

// Inserter inserts River jobs inside a transaction (the River client).
type Inserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// Options configure a Service.
type Options struct {
	DB     *db.DB
	Sealer Sealer
	Log    *slog.Logger
	// Production requires https URLs and refuses to connect to private, loopback and other
	// non-public addresses (checked on the address dialled, after DNS).
	Production bool
	// RetryBase is the delay before the first retry (doubling, at most MaxRetryDelay).
	RetryBase time.Duration
	Metrics   *metrics.Metrics
}

// Service manages webhooks and delivers their events.
type Service struct {
	o    Options
	jobs Inserter

	mu    sync.Mutex
	cache map[uuid.UUID]cached
}

// cached is a tenant's active webhooks, as the dispatcher last read them.
type cached struct {
	hooks []dbsqlc.WebhookListActiveRow
	at    time.Time
}

// CacheTTL is how long the dispatcher trusts its list of a tenant's webhooks: a webhook created
// or deleted on another process is seen by this one's events within it.
const CacheTTL = 5 * time.Second

// NewService returns the service; SetInserter must be called before events are dispatched.
func NewService(o Options) *Service {
	if o.RetryBase <= 0 {
		o.RetryBase = 10 * time.Second
	}
	return &Service{o: o, cache: map[uuid.UUID]cached{}}
}

// SetInserter sets the job inserter. It stays a setter: the River client is built from the
// workers, which need this service, so it exists only after NewService.
func (s *Service) SetInserter(j Inserter) { s.jobs = j }

// Webhook is a webhook without its secret.
type Webhook struct {
	ID        uuid.UUID
	URL       string
	Events    []string
	Active    bool
	CreatedAt time.Time
}

func webhookOf(w dbsqlc.Webhook) Webhook {
	return Webhook{ID: w.ID, URL: w.Url, Events: w.Events, Active: w.Active, CreatedAt: w.CreatedAt}
}

// Create is the input of Service.Create.
type Create struct {
	URL    string
	Events []string
	Secret string
}

var patternRE = regexp.MustCompile(`^(\*|[a-z][a-z0-9_]*(\.([a-z][a-z0-9_]*|\*))*)$`)

// Create makes a webhook (OWNER or ADMIN).
func (s *Service) Create(ctx context.Context, in Create) (Webhook, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return Webhook{}, err
	}
	if err := s.checkURL(in.URL); err != nil {
		return Webhook{}, err
	}
	if len(in.Events) == 0 || len(in.Events) > 50 {
		return Webhook{}, apperr.Invalid("events", "name from 1 to 50 event patterns, e.g. execution.* or approval.requested")
	}
	for _, p := range in.Events {
		if len(p) > 100 || !patternRE.MatchString(p) {
			return Webhook{}, apperr.Invalid("events", "%q is not an event pattern: use a type (approval.requested) or a glob (execution.*, budget.*, *)", p)
		}
	}
	if len(in.Secret) < MinSecretBytes || len(in.Secret) > 1024 {
		return Webhook{}, apperr.Invalid("secret", "must be from %d to 1024 bytes long", MinSecretBytes)
	}
	id := uuid.Must(uuid.NewV7())
	sealed, err := s.o.Sealer.Seal([]byte(in.Secret), id[:])
	if err != nil {
		return Webhook{}, fmt.Errorf("seal webhook secret: %w", err)
	}
	var out dbsqlc.Webhook
	err = s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.WebhookInsert(ctx, dbsqlc.WebhookInsertParams{
			TenantID: a.TenantID, ID: id, Url: in.URL, Events: in.Events, SecretSealed: sealed,
			CreatedBy: uuid.NullUUID{UUID: a.UserID, Valid: true},
		})
		return err
	})
	if err != nil {
		return Webhook{}, err
	}
	s.forget(a.TenantID)
	return webhookOf(out), nil
}

// checkURL refuses what is not an absolute http(s) URL (https only in production).
func (s *Service) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || len(raw) > 2048 {
		return apperr.Invalid("url", "must be an absolute URL such as https://example.com/hooks/agentry, without credentials")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && !s.o.Production:
	default:
		return apperr.Invalid("url", "must use https")
	}
	return nil
}

// List returns the tenant's webhooks (OWNER or ADMIN).
func (s *Service) List(ctx context.Context) ([]Webhook, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return nil, err
	}
	var out []Webhook
	err = s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.WebhookList(ctx, a.TenantID)
		for _, r := range rows {
			out = append(out, webhookOf(r))
		}
		return err
	})
	return out, err
}

// Get returns one webhook of the tenant (OWNER or ADMIN); another tenant's is NOT_FOUND.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (Webhook, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return Webhook{}, err
	}
	var out dbsqlc.Webhook
	err = s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.WebhookGet(ctx, dbsqlc.WebhookGetParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("webhook")
		}
		return err
	})
	return webhookOf(out), err
}

// Delete removes a webhook and its delivery log (OWNER or ADMIN).
func (s *Service) Delete(ctx context.Context, id uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return err
	}
	err = s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		n, err := tx.Q.WebhookDelete(ctx, dbsqlc.WebhookDeleteParams{TenantID: a.TenantID, ID: id})
		if err == nil && n == 0 {
			return apperr.NotFoundf("webhook")
		}
		return err
	})
	if err == nil {
		s.forget(a.TenantID)
	}
	return err
}

// Delivery is one event's delivery to one webhook.
type Delivery struct {
	ID           uuid.UUID
	WebhookID    uuid.UUID
	Event        string
	Status       Status
	Attempts     int
	ResponseCode *int
	DurationMs   *int
	Error        *string
	CreatedAt    time.Time
}

func deliveryOf(d dbsqlc.WebhookDelivery) Delivery {
	out := Delivery{ID: d.ID, WebhookID: d.WebhookID, Event: d.Event, Status: d.Status, Attempts: int(d.Attempts), Error: d.Error, CreatedAt: d.CreatedAt}
	if d.ResponseCode != nil {
		v := int(*d.ResponseCode)
		out.ResponseCode = &v
	}
	if d.DurationMs != nil {
		v := int(*d.DurationMs)
		out.DurationMs = &v
	}
	return out
}

// Deliveries returns a webhook's latest n deliveries, newest first (OWNER or ADMIN).
func (s *Service) Deliveries(ctx context.Context, webhookID uuid.UUID, n int) ([]Delivery, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return nil, err
	}
	var out []Delivery
	err = s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.WebhookDeliveryList(ctx, dbsqlc.WebhookDeliveryListParams{TenantID: a.TenantID, WebhookID: webhookID, N: int32(n)})
		for _, r := range rows {
			out = append(out, deliveryOf(r))
		}
		return err
	})
	return out, err
}

// Test sends a webhook.test event to the webhook (OWNER or ADMIN) and returns its delivery,
// PENDING until the job has run.
func (s *Service) Test(ctx context.Context, id uuid.UUID) (Delivery, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return Delivery{}, err
	}
	var out dbsqlc.WebhookDelivery
	err = s.o.DB.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.WebhookGet(ctx, dbsqlc.WebhookGetParams{TenantID: a.TenantID, ID: id}); db.IsNoRows(err) {
			return apperr.NotFoundf("webhook")
		} else if err != nil {
			return err
		}
		ev := events.Event{TenantID: a.TenantID, Type: TestEvent, Data: json.RawMessage(`{"test":true}`), Timestamp: time.Now().UTC()}
		ds, err := s.enqueue(ctx, tx, []pending{{hook: id, ev: ev}})
		if err != nil {
			return err
		}
		out = ds[0]
		return nil
	})
	return deliveryOf(out), err
}

// Matches reports whether event type typ matches pattern: an exact type, "*" (everything), or
// a glob whose "*" stands for one dot-separated part (execution.* matches execution.completed).
func Matches(pattern, typ string) bool {
	if pattern == "*" {
		return true
	}
	ok, err := path.Match(pattern, typ)
	return err == nil && ok
}

// Dispatch is the events tap: for each event of evs that matches a webhook of its tenant, it
// stores a delivery and inserts its job inside tx. With no webhook (the common case) it costs a
// map lookup once the tenant's list is cached.
func (s *Service) Dispatch(ctx context.Context, tx *db.Tx, evs []events.Event) error {
	if len(evs) == 0 || s.jobs == nil {
		return nil
	}
	tenantID := evs[0].TenantID
	hooks, err := s.hooksOf(ctx, tx, tenantID)
	if err != nil || len(hooks) == 0 {
		return err
	}
	var todo []pending
	for _, ev := range evs {
		if ev.Type == events.MessageDelta {
			continue
		}
		for _, h := range hooks {
			for _, p := range h.Events {
				if Matches(p, ev.Type) {
					todo = append(todo, pending{hook: h.ID, ev: ev})
					break
				}
			}
		}
	}
	if len(todo) == 0 {
		return nil
	}
	_, err = s.enqueue(ctx, tx, todo)
	return err
}

type pending struct {
	hook uuid.UUID
	ev   events.Event
}

// Payload is the JSON body of a delivery.
type Payload struct {
	// ID is the delivery's id (also the Agentry-Delivery header): the same on every attempt, so
	// a receiver can drop repeats.
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TenantID  string          `json:"tenantId"`
	RunID     string          `json:"runId,omitempty"`
	Seq       int             `json:"seq,omitempty"`
	Data      json.RawMessage `json:"data"`
	Timestamp time.Time       `json:"timestamp"`
}

// globalID is the API's id form of an object: base64url("Type:uuid").
func globalID(typ string, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + id.String()))
}

func (s *Service) enqueue(ctx context.Context, tx *db.Tx, todo []pending) ([]dbsqlc.WebhookDelivery, error) {
	out := make([]dbsqlc.WebhookDelivery, 0, len(todo))
	params := make([]river.InsertManyParams, 0, len(todo))
	for _, p := range todo {
		id := uuid.Must(uuid.NewV7())
		pl := Payload{ID: globalID("WebhookDelivery", id), Type: p.ev.Type, TenantID: globalID("Tenant", p.ev.TenantID), Seq: p.ev.Seq,
			Data: p.ev.Data, Timestamp: p.ev.Timestamp}
		if p.ev.RunID != uuid.Nil {
			pl.RunID = globalID("Run", p.ev.RunID)
		}
		if len(pl.Data) == 0 {
			pl.Data = json.RawMessage(`{}`)
		}
		body, err := json.Marshal(pl)
		if err != nil {
			return nil, fmt.Errorf("encode webhook payload: %w", err)
		}
		d, err := tx.Q.WebhookDeliveryInsert(ctx, dbsqlc.WebhookDeliveryInsertParams{
			TenantID: p.ev.TenantID, ID: id, WebhookID: p.hook, Event: p.ev.Type, Payload: body,
		})
		if err != nil {
			return nil, fmt.Errorf("store webhook delivery: %w", err)
		}
		out = append(out, d)
		params = append(params, river.InsertManyParams{Args: DeliverArgs{TenantID: p.ev.TenantID, DeliveryID: id}})
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx.Tx, params); err != nil {
		return nil, fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	return out, nil
}

// hooksOf returns the tenant's active webhooks, from the cache when it is fresh.
func (s *Service) hooksOf(ctx context.Context, tx *db.Tx, tenantID uuid.UUID) ([]dbsqlc.WebhookListActiveRow, error) {
	s.mu.Lock()
	c, ok := s.cache[tenantID]
	s.mu.Unlock()
	if ok && time.Since(c.at) < CacheTTL {
		return c.hooks, nil
	}
	hooks, err := tx.Q.WebhookListActive(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	s.mu.Lock()
	if len(s.cache) > 100_000 {
		clear(s.cache)
	}
	s.cache[tenantID] = cached{hooks: hooks, at: time.Now()}
	s.mu.Unlock()
	return hooks, nil
}

func (s *Service) forget(tenantID uuid.UUID) {
	s.mu.Lock()
	delete(s.cache, tenantID)
	s.mu.Unlock()
}
