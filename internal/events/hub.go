package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Hub is a process's one Redis subscription, fanned out in memory. Each tenant channel is
// subscribed while at least one local subscriber watches that tenant. A subscriber whose buffer
// is full loses ephemeral events (counted in Dropped) and, for durable ones, is told to refill
// from Postgres; a Redis reconnect tells every subscriber to refill.
type Hub struct {
	rdb    redis.UniversalClient
	prefix string
	log    *slog.Logger

	ps *redis.PubSub
	// mu orders the changes of the subscribers and of the Redis subscription (Subscribe, Close)
	// and guards waiters; subsMu guards tenants and to, and is never held over a call to Redis,
	// so a delivery (from Redis, or from a publisher of this process) never waits for one.
	mu      sync.Mutex
	subsMu  sync.Mutex
	tenants map[uuid.UUID]map[*Sub]struct{}
	waiters map[string][]chan struct{}
	to      []*Sub // deliver's scratch list of an event's subscribers (under subsMu)
	dropped atomic.Int64
	done    chan struct{}
	// origin starts the messages of the publisher that delivers to this hub itself
	// (Publisher.DeliverLocally): the hub skips them when they come back from Redis.
	origin string
	// publisher is the publisher that delivers to this hub itself (DeliverLocally), nil when
	// none does: a stream snapshot waits for what it has queued for Redis.
	publisher *Publisher
}

// originLen is the length of a message's origin: a message that does not start with '[' (a
// JSON array of events) starts with the origin of the hub its publisher delivered it to.
const originLen = 32

// Sub is one local subscriber: C carries matching events; Resync fires when events may have
// been lost (buffer overflow, Redis reconnect) and the subscriber should refill from Postgres.
type Sub struct {
	C      chan Event
	Resync chan struct{}
	tenant uuid.UUID
	match  func(Event) bool
	hub    *Hub
	once   sync.Once
}

// NewHub starts a hub; Close stops it.
func NewHub(rdb redis.UniversalClient, prefix string, log *slog.Logger) *Hub {
	h := &Hub{
		rdb: rdb, prefix: prefix, log: log,
		tenants: map[uuid.UUID]map[*Sub]struct{}{},
		waiters: map[string][]chan struct{}{},
		done:    make(chan struct{}),
		origin:  strings.ReplaceAll(uuid.NewString(), "-", ""),
	}
	h.ps = rdb.Subscribe(context.Background())
	go h.loop()
	return h
}

// Close ends the Redis subscription; subscribers stop receiving.
func (h *Hub) Close() error {
	err := h.ps.Close()
	<-h.done
	return err
}

// Dropped counts ephemeral events lost to full subscriber buffers.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }

// Subscribe registers a subscriber for the tenant's events that match. It returns once Redis
// has confirmed the channel subscription, so any event published afterwards reaches it.
func (h *Hub) Subscribe(ctx context.Context, tenantID uuid.UUID, match func(Event) bool) (*Sub, error) {
	s := &Sub{C: make(chan Event, 256), Resync: make(chan struct{}, 1), tenant: tenantID, match: match, hub: h}
	ch := Channel(h.prefix, tenantID)
	// The map and the Redis subscription change together under mu, so a concurrent last
	// Close (UNSUBSCRIBE) and first Subscribe (SUBSCRIBE) reach Redis in the order the map saw.
	h.mu.Lock()
	h.subsMu.Lock()
	set, ok := h.tenants[tenantID]
	if !ok {
		set = map[*Sub]struct{}{}
		h.tenants[tenantID] = set
	}
	set[s] = struct{}{}
	h.subsMu.Unlock()
	var wait chan struct{}
	if !ok || len(h.waiters[ch]) > 0 {
		wait = make(chan struct{})
		h.waiters[ch] = append(h.waiters[ch], wait)
	}
	var err error
	if !ok {
		err = h.ps.Subscribe(ctx, ch)
	}
	h.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("subscribe %s: %w", ch, err)
	}
	if wait == nil {
		return s, nil
	}
	select {
	case <-wait:
		return s, nil
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	case <-time.After(5 * time.Second):
		s.Close()
		return nil, errors.New("redis did not confirm the subscription within 5s")
	}
}

// Close unregisters the subscriber.
func (s *Sub) Close() {
	s.once.Do(func() {
		h := s.hub
		h.mu.Lock()
		defer h.mu.Unlock()
		h.subsMu.Lock()
		set := h.tenants[s.tenant]
		delete(set, s)
		last := len(set) == 0
		if last {
			delete(h.tenants, s.tenant)
		}
		h.subsMu.Unlock()
		if !last {
			return
		}
		if err := h.ps.Unsubscribe(context.Background(), Channel(h.prefix, s.tenant)); err != nil && !errors.Is(err, redis.ErrClosed) {
			h.log.Warn("unsubscribe", slog.Any("error", err))
		}
	})
}

func (h *Hub) loop() {
	defer close(h.done)
	for msg := range h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			h.mu.Lock()
			ws := h.waiters[m.Channel]
			delete(h.waiters, m.Channel)
			h.mu.Unlock()
			for _, w := range ws {
				close(w)
			}
			if len(ws) == 0 {
				// A resubscription after a reconnect: events may have been missed.
				h.resync(m.Channel)
			}
		case *redis.Message:
			payload := m.Payload
			if payload != "" && payload[0] != '[' && len(payload) >= originLen {
				if payload[:originLen] == h.origin {
					continue // delivered by its publisher already
				}
				payload = payload[originLen:]
			}
			var evs []Event
			if err := json.Unmarshal([]byte(payload), &evs); err != nil {
				h.log.Warn("bad event payload", slog.String("channel", m.Channel), slog.Any("error", err))
				continue
			}
			h.deliver(evs)
		}
	}
}

func (h *Hub) resync(channel string) {
	h.subsMu.Lock()
	defer h.subsMu.Unlock()
	for tenant, set := range h.tenants {
		if Channel(h.prefix, tenant) != channel {
			continue
		}
		for s := range set {
			s.signal()
		}
	}
}

func (h *Hub) deliver(evs []Event) {
	if len(evs) == 0 {
		return
	}
	h.subsMu.Lock()
	defer h.subsMu.Unlock()
	subs := h.tenants[evs[0].TenantID]
	for _, ev := range evs {
		// Each event's subscribers are matched once. Events go out in order, so each subscriber
		// gets them in order.
		to := h.to[:0]
		for s := range subs {
			if s.match == nil || s.match(ev) {
				to = append(to, s)
			}
		}
		for _, s := range to {
			select {
			case s.C <- ev:
			default:
				if ev.Durable() {
					s.signal()
				} else {
					h.dropped.Add(1)
				}
			}
		}
		clear(to)
		h.to = to
	}
}

func (s *Sub) signal() {
	select {
	case s.Resync <- struct{}{}:
	default:
	}
}
