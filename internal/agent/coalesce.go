package agent

import (
	"context"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/events"
)

// Delta coalescing: the first delta of a reply goes out at once (time to first token), later
// ones are batched until coalesceTokens deltas or coalesceWindow have accumulated.
const (
	coalesceTokens = 16
	coalesceWindow = 50 * time.Millisecond
)

// coalescer batches a reply's text deltas into message.delta events (ephemeral: Redis only).
type coalescer struct {
	pub       *events.Publisher
	scope     events.Scope
	callIndex int
	buf       strings.Builder
	pending   int
	sent      int
	last      time.Time
}

func newCoalescer(pub *events.Publisher, scope events.Scope, callIndex int) *coalescer {
	return &coalescer{pub: pub, scope: scope, callIndex: callIndex}
}

func (c *coalescer) add(ctx context.Context, text string) {
	c.buf.WriteString(text)
	c.pending++
	if c.sent == 0 || c.pending >= coalesceTokens || time.Since(c.last) >= coalesceWindow {
		c.flush(ctx)
	}
}

func (c *coalescer) flush(ctx context.Context) {
	if ev, ok := c.take(); ok {
		c.pub.Publish(ctx, c.scope.TenantID, ev)
	}
}

// take returns the pending text as a message.delta event without publishing it (the executor
// sends a reply's last delta with the transaction that stores the reply), and starts afresh.
func (c *coalescer) take() (events.Event, bool) {
	if c.pending == 0 {
		return events.Event{}, false
	}
	data := mustJSON(map[string]any{"text": c.buf.String(), "callIndex": c.callIndex, "index": c.sent})
	ev := events.Event{
		RunID: c.scope.RunID, TenantID: c.scope.TenantID, ConversationID: c.scope.ConversationID,
		Type: events.MessageDelta, Data: data, Timestamp: time.Now().UTC(),
	}
	c.buf.Reset()
	c.pending = 0
	c.sent++
	c.last = time.Now()
	return ev, true
}
