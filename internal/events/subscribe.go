package events

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Source reads a run's stored events after a seq (at most limit), in seq order.
type Source func(ctx context.Context, afterSeq, limit int) ([]Event, error)

// idleRefill is how long a run subscription waits without any event before it checks Postgres
// anyway: the last line of defence against a lost publish.
const idleRefill = 3 * time.Second

// SubscribeRun streams a run's events from h: first it subscribes to Redis, then replays the stored
// events after afterSeq, then forwards live ones. Durable events come out in seq order with no
// gap and no duplicate (a gap is refilled from Postgres); ephemeral ones (token deltas) are
// forwarded as they come. A subscription that joins (or resumes) while a reply is streaming
// gets, after the replay, one message.snapshot with the text streamed so far, then the deltas
// after it: none is repeated and none is missing. The stored log decides whether the reply is
// still streaming: a reply whose message.completed the replay delivered has no snapshot. The channel closes after the run's terminal event or when ctx ends;
// a terminal event that the stored events show the run was re-opened after (CONTINUE on its
// rollback question: execution.resumed follows) does not end a replay.
//
// Each event comes out as as(event), the subscriber's own type, straight from the goroutine
// that orders them: a goroutine between them would cost a wake-up per event and subscriber.
func SubscribeRun[T any](ctx context.Context, h *Hub, tenantID, runID, conversationID uuid.UUID, afterSeq int, src Source, as func(Event) T) (<-chan T, error) {
	sub, err := h.Subscribe(ctx, tenantID, func(e Event) bool { return e.RunID == runID })
	if err != nil {
		return nil, err
	}
	out := make(chan T, 64)
	go func() {
		defer close(out)
		defer sub.Close()
		last := afterSeq
		completed := map[int]bool{} // the replies whose message.completed went out
		var pos position
		send := func(e Event) bool {
			if e.ConversationID == uuid.Nil {
				e.ConversationID = conversationID
			}
			select {
			case out <- as(e):
				return true
			case <-ctx.Done():
				return false
			}
		}
		// refill delivers stored events after last; it reports false when the stream is over.
		refill := func() bool {
			for {
				evs, err := src(ctx, last, 500)
				if err != nil {
					h.log.WarnContext(ctx, "refill run events", "run_id", runID.String(), "error", err)
					return ctx.Err() == nil // try again on the next trigger
				}
				for i, e := range evs {
					if !send(e) {
						return false
					}
					if c, ok := completedCall(e); ok {
						completed[c] = true
					}
					last = e.Seq
					if Terminal(e.Type) && !reopened(evs[i+1:]) {
						return false
					}
				}
				if len(evs) < 500 {
					return true
				}
			}
		}
		if !refill() {
			return
		}
		if last == afterSeq && afterSeq > 0 && ended(ctx, src, afterSeq) {
			// Resumed at the end of a finished run: the client already has the terminal event.
			return
		}
		snap, ok, err := h.streamSnapshot(ctx, runID)
		if err != nil {
			h.log.WarnContext(ctx, "read the streamed-so-far text", "run_id", runID.String(), "error", err)
		}
		if ok && !completed[snap.CallIndex] {
			if !send(snapshotEvent(tenantID, runID, conversationID, snap)) {
				return
			}
			pos = position{active: true, at: deltaPos{CallIndex: snap.CallIndex, Index: snap.Index}}
		}
		idle := time.NewTimer(idleRefill)
		defer idle.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.Resync:
				if !refill() {
					return
				}
			case <-idle.C:
				if !refill() {
					return
				}
			case e := <-sub.C:
				switch {
				case !e.Durable():
					if pos.skip(e) {
						break // the snapshot included it
					}
					if !send(e) {
						return
					}
				case e.Seq <= last:
					// already delivered (replayed or duplicated)
				case e.Seq == last+1:
					if !send(e) {
						return
					}
					last = e.Seq
					if Terminal(e.Type) {
						return
					}
				default:
					if !refill() {
						return
					}
				}
			}
			if !idle.Stop() {
				select {
				case <-idle.C:
				default:
				}
			}
			idle.Reset(idleRefill)
		}
	}()
	return out, nil
}

// ended reports whether the stored event with seq is a terminal event of its run that the run
// was not re-opened after.
func ended(ctx context.Context, src Source, seq int) bool {
	evs, err := src(ctx, seq-1, 500)
	return err == nil && len(evs) >= 1 && evs[0].Seq == seq && Terminal(evs[0].Type) && !reopened(evs[1:])
}

// reopened reports whether evs (the events after a terminal event) re-open the run: an ended
// run the user chose to continue goes on with execution.resumed and ends again later. Other
// events after a terminal one (the decision on its rollback question) do not re-open it.
func reopened(evs []Event) bool {
	for _, e := range evs {
		if e.Type == ExecutionResumed {
			return true
		}
	}
	return false
}

// SubscribeConversation streams the live events (token deltas included) of every run of a
// conversation until ctx ends. It does not replay: runEvents does.
func (h *Hub) SubscribeConversation(ctx context.Context, tenantID, conversationID uuid.UUID) (<-chan Event, error) {
	sub, err := h.Subscribe(ctx, tenantID, func(e Event) bool { return e.ConversationID == conversationID })
	if err != nil {
		return nil, err
	}
	// The subscriber reads the hub's channel itself (no goroutine between them: each hop costs
	// a wake-up on every event), and a resync has nothing to refill here.
	context.AfterFunc(ctx, func() {
		sub.Close()
		close(sub.C) // Close took it out of the hub: nothing sends on C any more
	})
	return sub.C, nil
}
