package model

import (
	"time"

	"github.com/agentry/agentry/internal/webhook"
)

// Webhook is a tenant's webhook (its secret is never read back).
type Webhook struct{ Row webhook.Webhook }

func (w *Webhook) ID() string           { return EncodeID("Webhook", w.Row.ID) }
func (*Webhook) IsNode()                {}
func (w *Webhook) GetID() string        { return w.ID() }
func (w *Webhook) URL() string          { return w.Row.URL }
func (w *Webhook) Events() []string     { return w.Row.Events }
func (w *Webhook) Active() bool         { return w.Row.Active }
func (w *Webhook) CreatedAt() time.Time { return w.Row.CreatedAt }

// WebhookDelivery is one event's delivery to a webhook.
type WebhookDelivery struct{ Row webhook.Delivery }

func (d *WebhookDelivery) ID() string           { return EncodeID("WebhookDelivery", d.Row.ID) }
func (d *WebhookDelivery) Event() string        { return d.Row.Event }
func (d *WebhookDelivery) Status() string       { return string(d.Row.Status) }
func (d *WebhookDelivery) Attempts() int        { return d.Row.Attempts }
func (d *WebhookDelivery) ResponseCode() *int   { return d.Row.ResponseCode }
func (d *WebhookDelivery) DurationMs() *int     { return d.Row.DurationMs }
func (d *WebhookDelivery) Error() *string       { return d.Row.Error }
func (d *WebhookDelivery) CreatedAt() time.Time { return d.Row.CreatedAt }
