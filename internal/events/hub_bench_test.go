package events

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

// benchEvents is a Redis message's worth of events: a token delta, or a durable pair.
func benchEvents(n int) []Event {
	tenant, run, conv := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	out := make([]Event, n)
	for i := range out {
		out[i] = Event{Seq: i + 1, RunID: run, TenantID: tenant, ConversationID: conv, Type: MessageCompleted,
			Data:      json.RawMessage(`{"messageId":"01a201de-951b-7ccf-a491-6d9a0d8b1749","role":"ASSISTANT","content":"alpha bravo charlie delta echo foxtrot golf hotel","callIndex":0}`),
			Timestamp: time.Now().UTC()}
	}
	return out
}

// BenchmarkEventEncode is what Publish does to every batch before PUBLISH: marshal the events.
func BenchmarkEventEncode(b *testing.B) {
	for _, n := range []int{1, 2} {
		evs := benchEvents(n)
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(evs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHubDecodeDeliver is the hub's work per Redis message: decode the batch and hand
// each event to the tenant's local subscribers whose filter matches (here one run's).
func BenchmarkHubDecodeDeliver(b *testing.B) {
	for _, subs := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			evs := benchEvents(1)
			payload, err := json.Marshal(evs)
			if err != nil {
				b.Fatal(err)
			}
			h := &Hub{tenants: map[uuid.UUID]map[*Sub]struct{}{}}
			set := map[*Sub]struct{}{}
			runID := evs[0].RunID
			for range subs {
				set[&Sub{C: make(chan Event, 256), Resync: make(chan struct{}, 1), tenant: evs[0].TenantID, match: func(e Event) bool { return e.RunID == runID }, hub: h}] = struct{}{}
			}
			h.tenants[evs[0].TenantID] = set
			b.ReportAllocs()
			for b.Loop() {
				var got []Event
				if err := json.Unmarshal(payload, &got); err != nil {
					b.Fatal(err)
				}
				h.deliver(got)
				for s := range set {
					<-s.C
				}
			}
		})
	}
}
