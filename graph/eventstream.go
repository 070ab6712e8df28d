package graph

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/events"
)

// eventStreams is the executable schema with event subscriptions (runEvents,
// conversationEvents, tenantActivity) rendered once per event and shape: the hub hands every
// local subscriber of one published event the same events.Shared, and a subscription renders
// an event through gqlgen only when no subscriber asking for the same fields has rendered it
// yet; the others wait for that rendering and send it. A run watched by a hundred clients
// costs one rendering per event instead of a hundred (gqlgen's execution per subscriber was the
// largest part of a delivery's CPU: a third of the process's samples at 100 subscribers).
//
// It works beside gqlgen's own execution, not instead of it: the root field is resolved by
// gqlgen as usual (arguments, middlewares, errors), and the resolver, finding the slot Exec
// put in its context, hands the hub's channel to Exec's response handler instead of to
// gqlgen. For each event the handler either answers with the stored rendering or passes the
// event on to gqlgen's own stream and stores what it renders.
//
// The wrapper hides the optional graphql.ExecutableSchemaWithEventContext: a subscription field
// marked @subscriptionContext would need it passed through.
type eventStreams struct {
	graphql.ExecutableSchema
	// rendered and shared count events rendered by gqlgen and events answered with another
	// subscription's rendering.
	rendered, shared prometheus.Counter
}

// newEventStreams wraps es, registering its counters with reg (nil: not registered).
func newEventStreams(es graphql.ExecutableSchema, reg prometheus.Registerer) eventStreams {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_subscription_event_renders_total",
		Help: "Events sent to subscriptions, by how: rendered (by gqlgen for this subscription) or shared (the rendering of another subscription asking for the same fields).",
	}, []string{"how"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return eventStreams{ExecutableSchema: es, rendered: c.WithLabelValues("rendered"), shared: c.WithLabelValues("shared")}
}

// streamSlot is where an event subscription's resolver leaves its events for Exec's handler.
type streamSlot struct {
	mu      sync.Mutex
	claimed bool                 // Exec has looked: a resolver arriving later keeps its stream
	src     <-chan events.Event  // the hub's events
	in      chan *model.RunEvent // gqlgen's stream, fed by the handler on a miss
}

type streamSlotKey struct{}

// Exec runs the operation; for an event subscription it returns the sharing handler.
func (s eventStreams) Exec(ctx context.Context) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return s.ExecutableSchema.Exec(ctx)
	}
	slot := &streamSlot{}
	next := s.ExecutableSchema.Exec(context.WithValue(ctx, streamSlotKey{}, slot))
	slot.mu.Lock()
	slot.claimed = true
	src, in := slot.src, slot.in
	slot.mu.Unlock()
	if src == nil {
		return next
	}
	shape, shareable := eventShape(oc)
	return func(ctx context.Context) *graphql.Response {
		var ev events.Event
		select {
		case e, ok := <-src:
			if !ok {
				return nil
			}
			ev = e
		case <-ctx.Done():
			return nil
		}
		sh := ev.Shared()
		if !shareable {
			sh = nil
		}
		b, mine := sh.Rendering(ctx, shape)
		if !mine {
			if b == nil {
				return nil // ctx ended
			}
			s.shared.Inc()
			return &graphql.Response{Data: b}
		}
		var keep []byte
		defer func() { sh.Rendered(shape, keep) }()
		select {
		case in <- &model.RunEvent{Ev: ev}: // buffered and empty: next takes it at once
		case <-ctx.Done():
			return nil
		}
		s.rendered.Inc()
		resp := next(ctx)
		if sh != nil && resp != nil && len(resp.Errors) == 0 && len(graphql.GetErrors(ctx)) == 0 {
			// gqlgen renders every event into the same buffer: the shared copy is its own.
			keep = bytes.Clone(resp.Data)
		}
		return resp
	}
}

// eventStream is what an event subscription's resolver returns for the hub's events: the
// stream Exec's handler feeds (see eventStreams), or, outside it, a forwarding stream.
func eventStream(ctx context.Context, evs <-chan events.Event) <-chan *model.RunEvent {
	if slot, ok := ctx.Value(streamSlotKey{}).(*streamSlot); ok {
		slot.mu.Lock()
		defer slot.mu.Unlock()
		if !slot.claimed && slot.src == nil {
			slot.src, slot.in = evs, make(chan *model.RunEvent, 1)
			return slot.in
		}
	}
	return forward(ctx, evs)
}

// runEventLeaves are RunEvent's fields: scalars without arguments, so that what a
// subscription renders of an event depends only on which of them it selects under which
// aliases (TestRunEventLeavesAreTheSchemas keeps the list true).
var runEventLeaves = map[string]bool{"__typename": true, "seq": true, "runId": true, "type": true, "phase": true, "data": true, "timestamp": true}

// eventShape describes what the subscription renders of each event: the root field's alias
// and the RunEvent fields it selects (after @skip and @include) with their aliases. ok is false
// when the selection is something else, and then every event is rendered on its own.
func eventShape(oc *graphql.OperationContext) (shape string, ok bool) {
	roots := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"})
	if len(roots) != 1 {
		return "", false
	}
	var b strings.Builder
	b.WriteString(roots[0].Alias)
	for _, f := range graphql.CollectFields(oc, roots[0].Selections, []string{"RunEvent"}) {
		if !runEventLeaves[f.Name] {
			return "", false
		}
		b.WriteByte(0)
		b.WriteString(f.Alias)
		b.WriteByte(':')
		b.WriteString(f.Name)
	}
	return b.String(), true
}
