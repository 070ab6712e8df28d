package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/events"
)

// fanWindow is how many events the windowed publisher keeps ahead of the slowest subscriber
// (well under every buffer on the way, so nothing is dropped).
const fanWindow = 32

// fanSide is one side of FANOUT: a publisher and n subscribers that count what they receive.
type fanSide struct {
	recv    []atomic.Int64
	wake    chan struct{}
	lat     atomic.Pointer[samples]
	publish func(ctx context.Context, i int64, at time.Time) error
	close   func()
}

// received is called by subscriber i for each event; t is the intended send time (unix ns).
func (s *fanSide) received(i int, t int64, at time.Time) {
	s.recv[i].Add(1)
	if l := s.lat.Load(); l != nil && t > 0 {
		l.add(at.Sub(time.Unix(0, t)))
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *fanSide) min() int64 {
	m := int64(math.MaxInt64)
	for i := range s.recv {
		m = min(m, s.recv[i].Load())
	}
	return m
}

func (s *fanSide) sum() int64 {
	var n int64
	for i := range s.recv {
		n += s.recv[i].Load()
	}
	return n
}

func (s *fanSide) reset() {
	for i := range s.recv {
		s.recv[i].Store(0)
	}
}

// sync publishes probes until every subscriber has received one (subscriptions are not
// acknowledged), then resets the counts.
func (s *fanSide) sync(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for s.min() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("FANOUT: subscribers not ready after 10s")
		}
		if err := s.publish(ctx, 0, time.Time{}); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	s.reset()
	return nil
}

// windowed publishes as fast as the slowest subscriber keeps up (closed loop) for dur and
// returns the deliveries made in the window.
func (s *fanSide) windowed(ctx context.Context, dur time.Duration) (int64, error) {
	s.reset()
	end := time.Now().Add(dur)
	var sent int64
	for time.Now().Before(end) {
		if sent-s.min() >= fanWindow {
			select {
			case <-s.wake:
			case <-time.After(time.Millisecond):
			}
			continue
		}
		sent++
		if err := s.publish(ctx, sent, time.Time{}); err != nil {
			return 0, err
		}
	}
	n := s.sum()
	s.drain(sent)
	return n, nil
}

// paced publishes at rate per second for dur (open loop) and records delivery latencies from
// each event's intended send time.
func (s *fanSide) paced(ctx context.Context, rate float64, dur time.Duration, into *samples) error {
	s.reset()
	s.lat.Store(into)
	defer s.lat.Store(nil)
	interval := time.Duration(float64(time.Second) / rate)
	n := int64(dur / interval)
	start := time.Now().Add(5 * time.Millisecond)
	for i := int64(1); i <= n; i++ {
		at := start.Add(time.Duration(i-1) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		if err := s.publish(ctx, i, at); err != nil {
			return err
		}
	}
	s.drain(n)
	got := s.sum()
	if missing := n*int64(len(s.recv)) - got; missing > 0 {
		into.errors.Add(missing)
	}
	return nil
}

// drain waits (at most 5 s) until every subscriber has received sent events.
func (s *fanSide) drain(sent int64) {
	deadline := time.Now().Add(5 * time.Second)
	for s.min() < sent && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// fanTime reads the intended send time ("t", unix ns) out of a FANOUT event as received by
// either side (a WebSocket message or a Redis payload) without decoding the rest: both sides'
// subscribers run in the bench process, and decoding 100k messages a second would make the
// harness the bottleneck. ok is false for other messages.
func fanTime(raw []byte) (t int64, ok bool) {
	if !bytes.Contains(raw, []byte(`"message.delta"`)) {
		return 0, false
	}
	i := bytes.Index(raw, []byte(`"t":`))
	if i < 0 {
		return 0, false
	}
	for _, c := range raw[i+4:] {
		if c < '0' || c > '9' {
			break
		}
		t = t*10 + int64(c-'0')
	}
	return t, true
}

// agentryFan: events of one running run published by agentry's Publisher (as the executor
// publishes token deltas), received by n WebSocket clients subscribed to runEvents.
func (e *env) agentryFan(ctx context.Context, n int, s session, runID string, scope events.Scope) (*fanSide, error) {
	side := &fanSide{recv: make([]atomic.Int64, n), wake: make(chan struct{}, 1)}
	pub := events.NewPublisher(e.app.Redis, e.app.Config.RedisPrefix, e.app.Log)
	// The side's deltas are numbered from 0, probes and rounds alike: the first (index 0)
	// starts the run's streamed-so-far list anew before any subscriber joins, and a
	// subscription drops a delta whose index its snapshot of that list holds.
	var index atomic.Int64
	index.Store(-1)
	side.publish = func(ctx context.Context, _ int64, at time.Time) error {
		var t int64
		if !at.IsZero() {
			t = at.UnixNano()
		}
		data := fmt.Appendf(nil, `{"text":" fan","callIndex":0,"index":%d,"t":%d}`, index.Add(1), t)
		pub.Publish(ctx, scope.TenantID, events.Event{RunID: scope.RunID, TenantID: scope.TenantID, ConversationID: scope.ConversationID,
			Type: events.MessageDelta, Data: data, Timestamp: time.Now().UTC()})
		return nil
	}
	if err := side.publish(ctx, 0, time.Time{}); err != nil {
		return nil, err
	}
	if err := pub.Flush(ctx); err != nil {
		return nil, err
	}
	var socks []*wsConn
	side.close = func() {
		var wg sync.WaitGroup
		for _, w := range socks {
			wg.Add(1)
			go func() { defer wg.Done(); w.close() }()
		}
		wg.Wait()
	}
	for i := 0; i < n; i++ {
		w, err := dialWSRaw(ctx, e.baseURL, s.token, func(string, wsEvent) {}, func(raw []byte, at time.Time) bool {
			t, ok := fanTime(raw)
			if ok {
				side.received(i, t, at)
			}
			return ok
		})
		if err != nil {
			side.close()
			return nil, err
		}
		socks = append(socks, w)
		if _, err := w.subscribeRun(ctx, runID, 0); err != nil {
			side.close()
			return nil, err
		}
	}
	if err := side.sync(ctx); err != nil {
		side.close()
		return nil, err
	}
	return side, nil
}

// redisFan: raw go-redis pub/sub, n subscriptions (a connection each) on one channel, the same
// payload as agentry's.
func (e *env) redisFan(ctx context.Context, n int, scope events.Scope) (*fanSide, error) {
	side := &fanSide{recv: make([]atomic.Int64, n), wake: make(chan struct{}, 1)}
	ch := "bench-fanout:" + uuid.NewString()
	side.publish = func(ctx context.Context, i int64, at time.Time) error {
		var t int64
		if !at.IsZero() {
			t = at.UnixNano()
		}
		payload, err := json.Marshal([]events.Event{{RunID: scope.RunID, TenantID: scope.TenantID, ConversationID: scope.ConversationID,
			Type: events.MessageDelta, Data: fmt.Appendf(nil, `{"text":" fan","callIndex":0,"index":%d,"t":%d}`, i, t), Timestamp: time.Now().UTC()}})
		if err != nil {
			return err
		}
		return e.rdb.Publish(ctx, ch, payload).Err()
	}
	var subs []*redis.PubSub
	var wg sync.WaitGroup
	side.close = func() {
		for _, ps := range subs {
			_ = ps.Close()
		}
		wg.Wait()
	}
	for i := 0; i < n; i++ {
		ps := e.rdb.Subscribe(ctx, ch)
		if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
			side.close()
			return nil, err
		}
		subs = append(subs, ps)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for msg := range ps.Channel(redis.WithChannelSize(1024)) {
				at := time.Now()
				if t, ok := fanTime([]byte(msg.Payload)); ok {
					side.received(i, t, at)
				}
			}
		}()
	}
	if err := side.sync(ctx); err != nil {
		side.close()
		return nil, err
	}
	return side, nil
}

// measureFanout: one run's events delivered to N subscribers per second (N = 1, 10, 100)
// against raw go-redis fan-out to N, and the p99 delivery latency at 1k events/s to 100
// subscribers.
func measureFanout(ctx context.Context, e *env, rep *Report) error {
	win := e.o.window(2*time.Second, 750*time.Millisecond)
	s := e.sessions[0]
	convs, err := e.conversations(ctx, 1, "bench-hold")
	if err != nil {
		return err
	}
	runID, err := e.gql.sendMessage(ctx, s, convs[0].id, "Hold on.")
	if err != nil {
		return err
	}
	defer e.llm.Release()
	runUUID, err := decodeID(runID)
	if err != nil {
		return err
	}
	convUUID, err := decodeID(convs[0].id)
	if err != nil {
		return err
	}
	scope := events.Scope{TenantID: s.tenantID, RunID: runUUID, ConversationID: convUUID}
	for _, n := range e.o.Subscribers {
		ours, err := e.agentryFan(ctx, n, s, runID, scope)
		if err != nil {
			return err
		}
		base, err := e.redisFan(ctx, n, scope)
		if err != nil {
			ours.close()
			return err
		}
		var b, o rate
		warm := func(ctx context.Context) error {
			d := e.o.window(500*time.Millisecond, 250*time.Millisecond)
			if _, err := base.windowed(ctx, d); err != nil {
				return err
			}
			_, err := ours.windowed(ctx, d)
			return err
		}
		err = e.alternate(ctx, fmt.Sprintf("FANOUT N=%d", n), warm,
			func(ctx context.Context, _ int, _ bool) error {
				k, err := base.windowed(ctx, win)
				b.add(k, win, 0)
				return err
			},
			func(ctx context.Context, _ int, last bool) error {
				var err error
				e.profile(fmt.Sprintf("fanout-%d", n), last, func() {
					var k int64
					k, err = ours.windowed(ctx, win)
					o.add(k, win, 0)
				})
				return err
			})
		if err == nil && n == e.o.Subscribers[len(e.o.Subscribers)-1] {
			err = fanLatency(ctx, e, rep, base, ours)
		}
		ours.close()
		base.close()
		if err != nil {
			return err
		}
		bs, os := b.perSecond(), o.perSecond()
		rep.Checks = append(rep.Checks, Check{Measure: "FANOUT", Name: fmt.Sprintf("FANOUT N=%d", n), Unit: "/s", Baseline: bs, Agentry: os, Ratio: os / bs,
			Goal: ">= 0.25x baseline", Status: pass(os/bs >= 0.25)})
	}
	return nil
}

// fanLatency: p99 delivery latency at 1k events/s to every subscriber (100 in a real run).
func fanLatency(ctx context.Context, e *env, rep *Report, base, ours *fanSide) error {
	const rate = 1000.0
	win := e.o.window(3*time.Second, time.Second)
	bl, ol := &samples{}, &samples{}
	err := e.alternate(ctx, "FANOUT latency", nil,
		func(ctx context.Context, _ int, _ bool) error { return base.paced(ctx, rate, win, bl) },
		func(ctx context.Context, _ int, last bool) error {
			var err error
			e.profile("fanout-latency", last, func() { err = ours.paced(ctx, rate, win, ol) })
			return err
		})
	if err != nil {
		return err
	}
	note, ok := errorNote(bl, ol)
	b, o := bl.pct(99), ol.pct(99)
	rep.Checks = append(rep.Checks, Check{Measure: "FANOUT", Name: fmt.Sprintf("FANOUT p99 1k/s x %d", len(ours.recv)), Unit: "ms", Baseline: b, Agentry: o, Ratio: o / b,
		Goal: "p99 <= 50 ms", Status: pass(ok && o <= 50), Note: joinNote(fmt.Sprintf("p50 %.2f ms (baseline %.2f)", ol.pct(50), bl.pct(50)), note)})
	return nil
}
