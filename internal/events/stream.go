package events

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// MessageSnapshot is the event a run subscription sends first when it joins while a model
// reply is streaming: the text streamed so far (data: callIndex, index of the last delta it
// includes, text). It is ephemeral like the deltas (seq 0, never stored); the deltas after it
// continue at index+1.
const MessageSnapshot = "message.snapshot"

// streamTTL bounds how long a reply's streamed-so-far list outlives its last delta (a worker
// that died mid-reply never clears it).
const streamTTL = time.Hour

// streamKey is the Redis list of the token deltas of a run's reply being streamed: the data
// of each message.delta, in order, cleared when the reply is stored.
func streamKey(prefix string, runID uuid.UUID) string {
	return prefix + "agentry:stream:" + runID.String()
}

// streamWrite is what one event changes in its run's streamed-so-far list: a delta is added
// (the first of a reply, index 0, replaces what the list held), a stored assistant message
// clears it.
type streamWrite struct {
	run   uuid.UUID
	data  []byte
	reset bool
	clear bool
}

// deltaPos is where a message.delta sits: its model call and its index in the call's deltas.
type deltaPos struct {
	CallIndex int `json:"callIndex"`
	Index     int `json:"index"`
}

// streamWrites lists the stream writes of evs (token deltas and stored assistant messages).
func streamWrites(evs []Event) []streamWrite {
	var out []streamWrite
	for _, e := range evs {
		switch e.Type {
		case MessageDelta:
			var p deltaPos
			if json.Unmarshal(e.Data, &p) != nil {
				continue
			}
			out = append(out, streamWrite{run: e.RunID, data: e.Data, reset: p.Index == 0})
		case MessageCompleted:
			if e.Durable() && assistantMessage(e) {
				out = append(out, streamWrite{run: e.RunID, clear: true})
			}
		}
	}
	return out
}

func assistantMessage(e Event) bool {
	var m struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(e.Data, &m) == nil && m.Role == "ASSISTANT"
}

// queue adds w's commands to pipe.
func (w streamWrite) queue(ctx context.Context, pipe redis.Pipeliner, prefix string) {
	key := streamKey(prefix, w.run)
	if w.clear || w.reset {
		pipe.Del(ctx, key)
	}
	if w.data != nil {
		pipe.RPush(ctx, key, w.data)
		pipe.Expire(ctx, key, streamTTL) // a list nobody clears goes an hour after its last delta
	}
}

// Snapshot is the text a run's current reply has streamed so far.
type Snapshot struct {
	CallIndex int    `json:"callIndex"`
	Index     int    `json:"index"`
	Text      string `json:"text"`
}

// streamSnapshot reads what the run's current reply has streamed so far (ok false when
// nothing is streaming). Called after the subscriber is registered: a delta this read misses
// was published after the registration, so the subscriber receives it. A process's own
// publisher hands deltas to its hub before Redis has them, so its queue is sent first.
func (h *Hub) streamSnapshot(ctx context.Context, runID uuid.UUID) (Snapshot, bool, error) {
	if h.publisher != nil {
		if err := h.publisher.Flush(ctx); err != nil {
			return Snapshot{}, false, err
		}
	}
	items, err := h.rdb.LRange(ctx, streamKey(h.prefix, runID), 0, -1).Result()
	if err != nil || len(items) == 0 {
		return Snapshot{}, false, err
	}
	var b strings.Builder
	snap := Snapshot{Index: -1}
	for i, it := range items {
		var d struct {
			deltaPos
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(it), &d); err != nil {
			continue
		}
		if i == 0 {
			snap.CallIndex = d.CallIndex
		}
		if d.CallIndex != snap.CallIndex || d.Index <= snap.Index {
			continue
		}
		b.WriteString(d.Text)
		snap.Index = d.Index
	}
	snap.Text = b.String()
	return snap, snap.Index >= 0, nil
}

// snapshotEvent is s as the message.snapshot event of run.
func snapshotEvent(tenantID, runID, conversationID uuid.UUID, s Snapshot) Event {
	data, _ := json.Marshal(s)
	return Event{RunID: runID, TenantID: tenantID, ConversationID: conversationID, Type: MessageSnapshot, Data: data, Timestamp: time.Now().UTC()}
}

// completedCall is the model call whose reply e (a stored message.completed) holds, if it is
// an assistant's.
func completedCall(e Event) (int, bool) {
	if e.Type != MessageCompleted || !e.Durable() {
		return 0, false
	}
	var m struct {
		Role      string `json:"role"`
		CallIndex *int   `json:"callIndex"`
	}
	if json.Unmarshal(e.Data, &m) != nil || m.Role != "ASSISTANT" || m.CallIndex == nil {
		return 0, false
	}
	return *m.CallIndex, true
}

// position tracks a subscriber's place in a reply it joined through a snapshot: deltas the
// snapshot included are skipped, until the first delta after it (or the reply's end).
type position struct {
	active bool
	at     deltaPos
}

// skip reports whether e (a live ephemeral event) is a delta the snapshot already gave; the
// first one after it ends the tracking.
func (p *position) skip(e Event) bool {
	if !p.active || e.Type != MessageDelta {
		return false
	}
	var d deltaPos
	if json.Unmarshal(e.Data, &d) != nil {
		return false
	}
	if d.CallIndex < p.at.CallIndex || (d.CallIndex == p.at.CallIndex && d.Index <= p.at.Index) {
		return true
	}
	p.active = false
	return false
}
