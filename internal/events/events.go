// Package events is agentry's event system: one envelope for every event, a per-run gapless
// event log in Postgres (run_events) written in the transaction of the state it describes, and a
// Redis fan-out (one channel per tenant, batches of events per message) that API processes
// subscribe to through one connection each and fan out in memory.
//
// Durable events have seq >= 1 and can always be replayed from Postgres; ephemeral events
// (message.delta) have seq 0 and only ever travel through Redis.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/metrics"
)

// Event types.
const (
	TaskQueued           = "task.queued"
	TaskStarted          = "task.started"
	TaskCompleted        = "task.completed"
	TaskFailed           = "task.failed"
	TaskRetrying         = "task.retrying"
	ExecutionStarted     = "execution.started"
	ExecutionCompleted   = "execution.completed"
	ExecutionFailed      = "execution.failed"
	ExecutionCancelled   = "execution.cancelled"
	ExecutionTimedOut    = "execution.timed_out"
	MessageDelta         = "message.delta"
	MessageCompleted     = "message.completed"
	ToolStarted          = "tool.started"
	ToolCompleted        = "tool.completed"
	ToolFailed           = "tool.failed"
	UsageRecorded        = "usage.recorded"
	ContextWindowApplied = "context.window.applied"
	ExecutionPaused      = "execution.paused"
	ExecutionResumed     = "execution.resumed"
	ApprovalRequested    = "approval.requested"
	ApprovalResolved     = "approval.resolved"
	ExecutionReflected   = "execution.reflected"
	ExecutionBacktracked = "execution.backtracked"
	// ExecutionWaiting: the run parked WAITING for its sub-agents (no worker held).
	ExecutionWaiting = "execution.waiting"
	// Sub-agents, on the parent's stream (the child's own events are on its run's stream).
	SubagentSpawned          = "subagent.spawned"
	SubagentAwaitingApproval = "subagent.awaiting_approval"
	SubagentStarted          = "subagent.started"
	SubagentCompleted        = "subagent.completed"
	SubagentFailed           = "subagent.failed"
	SubagentCancelled        = "subagent.cancelled"
	SubagentTimedOut         = "subagent.timed_out"
)

// Terminal reports whether an event of type t ends its run. Only the decision on the run's
// rollback question (approval.resolved, state.rolled_back or state.kept) may follow it, or, when
// the user chose CONTINUE, execution.resumed and the rest of the re-opened run.
func Terminal(t string) bool {
	switch t {
	case ExecutionCompleted, ExecutionFailed, ExecutionCancelled, ExecutionTimedOut:
		return true
	}
	return false
}

// Event is the envelope of every event.
type Event struct {
	Seq            int             `json:"seq"`
	RunID          uuid.UUID       `json:"runId"`
	TenantID       uuid.UUID       `json:"tenantId"`
	ConversationID uuid.UUID       `json:"conversationId,omitzero"`
	Type           string          `json:"type"`
	Phase          string          `json:"phase,omitempty"`
	Data           json.RawMessage `json:"data"`
	Timestamp      time.Time       `json:"timestamp"`
}

// Durable reports whether e is stored in Postgres (has a seq).
func (e Event) Durable() bool { return e.Seq > 0 }

// New is an event to append: its type, optional phase and data (marshalled to JSON).
type New struct {
	Type  string
	Phase string
	Data  any
}

// Scope names the run an event belongs to.
type Scope struct {
	TenantID       uuid.UUID
	RunID          uuid.UUID
	ConversationID uuid.UUID // uuid.Nil when the run has no conversation
}

// Publisher sends events to Redis. Publish returns at once: messages go out in the order they
// were published, by one goroutine at a time that sends whatever has queued up meanwhile as one
// pipeline (one round trip), so no caller (a transaction's commit, the token stream) waits for
// Redis, and a burst costs one round trip.
type Publisher struct {
	rdb    redis.UniversalClient
	prefix string
	log    *slog.Logger

	mu      sync.Mutex
	queue   []outgoing
	sending bool
	// queued and sent count messages (dropped ones aside); sentCond is signalled as sent grows.
	queued, sent int64
	sentCond     *sync.Cond
	dropped      int64

	// local is the hub of this process that gets what p publishes at once (DeliverLocally);
	// origin, which starts each message p sends to Redis, tells that hub to skip it.
	local  *Hub
	origin string
	// metrics counts messages that failed or were dropped (nil: not counted).
	metrics *metrics.Metrics
	// tap sees the events stored by Append (and tenant events given to Tap) inside their
	// transaction: webhook deliveries are enqueued with the events they deliver.
	tap TapFunc
}

// TapFunc is given events inside the transaction that stores them; an error fails it.
type TapFunc func(ctx context.Context, tx *db.Tx, evs []Event) error

// PublisherOption configures a Publisher at construction (NewPublisher).
type PublisherOption func(*Publisher)

// WithTap sets the function that sees the events the publisher appends.
func WithTap(f TapFunc) PublisherOption { return func(p *Publisher) { p.tap = f } }

// WithMetrics makes the publisher count the messages it could not publish.
func WithMetrics(m *metrics.Metrics) PublisherOption { return func(p *Publisher) { p.metrics = m } }

// Tap gives evs (events of one tenant made inside tx without Append, such as budget events) to
// the tap.
func (p *Publisher) Tap(ctx context.Context, tx *db.Tx, evs []Event) error {
	if p.tap == nil || len(evs) == 0 {
		return nil
	}
	return p.tap(ctx, tx, evs)
}

// outgoing is one queued message.
type outgoing struct {
	ctx     context.Context
	channel string
	payload []byte
	// streams are the writes to run's streamed-so-far lists that go before the message
	// (streamWrites).
	streams []streamWrite
}

// MaxQueued bounds the messages waiting for Redis (while it is slow or down): beyond it new
// messages are dropped and logged. Subscribers refill durable events from Postgres after a
// resubscription; deltas are best effort.
const MaxQueued = 10000

// NewPublisher returns a publisher. prefix namespaces the channels (tests use one per test).
func NewPublisher(rdb redis.UniversalClient, prefix string, log *slog.Logger, options ...PublisherOption) *Publisher {
	p := &Publisher{rdb: rdb, prefix: prefix, log: log}
	p.sentCond = sync.NewCond(&p.mu)
	for _, o := range options {
		o(p)
	}
	return p
}

// DeliverLocally makes p hand what it publishes to h's subscribers at once, in the order it was
// published, as well as to Redis for the hubs of other processes: a subscriber watching a run
// worked in its own process does not wait for the message to go through Redis and back (a
// round trip to Redis and a hand-off to the hub's connection, on every token delta). The
// messages p sends start with h's origin, so h skips them when Redis brings them back. Call it
// before p publishes anything.
func (p *Publisher) DeliverLocally(h *Hub) {
	p.local, p.origin = h, h.origin
	h.publisher = p
}

// Channel is the Redis channel of a tenant's events.
func Channel(prefix string, tenantID uuid.UUID) string {
	return prefix + "agentry:t:" + tenantID.String()
}

// Append stores events of scope's run in tx with the next seqs and publishes them once tx
// commits. The run row is locked until commit, so seqs are gapless and commit in order.
func (p *Publisher) Append(ctx context.Context, tx *db.Tx, scope Scope, news ...New) ([]Event, error) {
	if len(news) == 0 {
		return nil, nil
	}
	b, err := Encode(scope, time.Now(), news...)
	if err != nil {
		return nil, err
	}
	// One round trip: the seqs and the rows.
	last, err := tx.Q.RunEventAppend(ctx, dbsqlc.RunEventAppendParams{TenantID: scope.TenantID, RunID: scope.RunID,
		Types: b.Types, Phases: b.Phases, Datas: b.Datas, CreatedAt: b.CreatedAt})
	if err != nil {
		return nil, fmt.Errorf("append events to run %s: %w", scope.RunID, err)
	}
	out := p.Stored(ctx, tx, b, last)
	if err := p.Tap(ctx, tx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Batch is events of one run encoded for a statement that stores them, its columns as arrays
// (RunEventAppend, or a statement that writes the run and stores its events with it:
// RunInsertWithEvents).
type Batch struct {
	Types, Phases, Datas []string
	CreatedAt            time.Time
	evs                  []Event
}

// Encode encodes news of scope's run for storing, made at.
func Encode(scope Scope, at time.Time, news ...New) (Batch, error) {
	now := at.UTC()
	b := Batch{CreatedAt: now, Types: make([]string, len(news)), Phases: make([]string, len(news)), Datas: make([]string, len(news)),
		evs: make([]Event, len(news))}
	for i, n := range news {
		data, err := json.Marshal(n.Data)
		if err != nil {
			return Batch{}, fmt.Errorf("marshal %s: %w", n.Type, err)
		}
		if n.Data == nil {
			data = []byte("{}")
		}
		b.evs[i] = Event{RunID: scope.RunID, TenantID: scope.TenantID, ConversationID: scope.ConversationID,
			Type: n.Type, Phase: n.Phase, Data: data, Timestamp: now}
		b.Types[i], b.Phases[i], b.Datas[i] = n.Type, n.Phase, string(data)
	}
	return b, nil
}

// Stored publishes b's events once tx commits, now that a statement of tx stored them with the
// seqs ending at last (the run's last_seq after it), and returns them.
func (p *Publisher) Stored(ctx context.Context, tx *db.Tx, b Batch, last int32) []Event {
	out := b.evs
	if len(out) == 0 {
		return nil
	}
	for i := range out {
		out[i].Seq = int(last) - len(out) + i + 1
	}
	p.stage(ctx, tx, out[0].TenantID, out)
	return out
}

// Stage publishes evs (ephemeral ones, such as the last token delta of a reply being stored)
// once tx commits, in the same message as the events the transaction appends: nothing when it
// rolls back.
func (p *Publisher) Stage(ctx context.Context, tx *db.Tx, tenantID uuid.UUID, evs ...Event) {
	p.stage(ctx, tx, tenantID, evs)
}

// staged is events of one tenant waiting for their transaction's commit.
type staged struct {
	ctx    context.Context
	tenant uuid.UUID
	evs    []Event
}

// stage adds evs to tx's batch of events: after the commit, the batch goes out as one message
// per tenant (a transaction that stores a reply and ends its run publishes once, not twice).
func (p *Publisher) stage(ctx context.Context, tx *db.Tx, tenantID uuid.UUID, evs []Event) {
	if len(evs) == 0 {
		return
	}
	tx.AfterCommitBatch(p, staged{ctx: context.WithoutCancel(ctx), tenant: tenantID, evs: evs}, p.flush)
}

// flush publishes a committed transaction's events, in order, one message per tenant.
func (p *Publisher) flush(items []any) {
	var tenants []uuid.UUID
	byTenant := map[uuid.UUID][]Event{}
	for _, it := range items {
		s := it.(staged)
		if _, ok := byTenant[s.tenant]; !ok {
			tenants = append(tenants, s.tenant)
		}
		byTenant[s.tenant] = append(byTenant[s.tenant], s.evs...)
	}
	ctx := items[0].(staged).ctx
	for _, t := range tenants {
		p.Publish(ctx, t, byTenant[t]...)
	}
}

// Publish queues events (durable ones after their commit, or ephemeral ones) as one message,
// sent after every message published before it. A failure is logged, not returned:
// subscribers refill durable events from Postgres, and ephemeral ones are best effort by
// definition. evs must not change afterwards: local subscribers (DeliverLocally) share them.
func (p *Publisher) Publish(ctx context.Context, tenantID uuid.UUID, evs ...Event) {
	if len(evs) == 0 {
		return
	}
	payload, err := json.Marshal(evs)
	if err != nil {
		p.log.ErrorContext(ctx, "marshal events", slog.Any("error", err))
		return
	}
	if p.origin != "" {
		payload = append([]byte(p.origin), payload...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local != nil {
		// Under p.mu, so local subscribers get messages in the order they were published.
		p.local.deliver(evs)
	}
	if len(p.queue) >= MaxQueued {
		p.metrics.PublishFailed(1)
		if p.dropped++; p.dropped == 1 || p.dropped%1000 == 0 {
			p.log.WarnContext(ctx, "publish queue full: events dropped", slog.Int64("dropped", p.dropped), slog.String("tenant_id", tenantID.String()))
		}
		return
	}
	p.queue = append(p.queue, outgoing{ctx: context.WithoutCancel(ctx), channel: Channel(p.prefix, tenantID), payload: payload, streams: streamWrites(evs)})
	p.queued++
	if !p.sending {
		p.sending = true
		go p.send()
	}
}

// send sends the queue until it is empty, then ends (it is started again by the next Publish).
func (p *Publisher) send() {
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		if len(batch) == 0 {
			p.sending = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		var err error
		if len(batch) == 1 && len(batch[0].streams) == 0 {
			err = p.rdb.Publish(batch[0].ctx, batch[0].channel, batch[0].payload).Err()
		} else {
			_, err = p.rdb.Pipelined(batch[0].ctx, func(pipe redis.Pipeliner) error {
				for _, m := range batch {
					// A message's stream writes go first: whoever finds a delta missing
					// from a stream's list subscribed before its message was published.
					for _, w := range m.streams {
						w.queue(m.ctx, pipe, p.prefix)
					}
					pipe.Publish(m.ctx, m.channel, m.payload)
				}
				return nil
			})
		}
		if err != nil {
			p.metrics.PublishFailed(len(batch))
			p.log.WarnContext(batch[0].ctx, "publish events", slog.Any("error", err), slog.Int("messages", len(batch)))
		}
		p.mu.Lock()
		p.sent += int64(len(batch))
		p.sentCond.Broadcast()
		p.mu.Unlock()
	}
}

// Flush waits until every message published before it has been sent (or failed, which is
// logged), or ctx ends: before the Redis client closes, and for tests that read Redis directly.
func (p *Publisher) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.sentCond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for target := p.queued; p.sent < target; {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.sentCond.Wait()
	}
	return nil
}

// List reads a run's stored events after afterSeq (at most limit).
func List(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, afterSeq, limit int) ([]Event, error) {
	rows, err := tx.Q.RunEventList(ctx, dbsqlc.RunEventListParams{TenantID: tenantID, RunID: runID, AfterSeq: int32(afterSeq), Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{Seq: int(r.Seq), RunID: r.RunID, TenantID: r.TenantID, Type: r.Type, Data: r.Data, Timestamp: r.CreatedAt.UTC()}
		if r.Phase != nil {
			out[i].Phase = *r.Phase
		}
	}
	return out, nil
}
