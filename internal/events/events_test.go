package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
)

// These tests run the event system against the real test Postgres (a fresh database each) and
// Redis (a unique channel prefix each, so parallel tests never see each other's events).

var prefixSeq atomic.Int64

func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// fixture is one tenant with one run, a publisher and a hub on a prefix of its own.
type fixture struct {
	db     *db.DB
	rdb    *redis.Client
	prefix string
	log    *slog.Logger
	pub    *events.Publisher
	// quiet stores events like pub but publishes them where nobody listens: the events exist
	// in Postgres only, as if their publish had been lost.
	quiet *events.Publisher
	hub   *events.Hub
	scope events.Scope
	// sourceCalls counts reads of the run's stored events through src.
	sourceCalls atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	d, _ := dbtest.Open(t)
	opts, err := redis.ParseURL(redisURL())
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err())

	f := &fixture{db: d, rdb: rdb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.prefix = fmt.Sprintf("evtest%d-%d:", time.Now().UnixNano(), prefixSeq.Add(1))
	f.pub = events.NewPublisher(rdb, f.prefix, f.log)
	f.quiet = events.NewPublisher(rdb, f.prefix+"nobody-listens:", f.log)
	f.hub = events.NewHub(rdb, f.prefix, f.log)
	t.Cleanup(func() { _ = f.hub.Close() })
	f.scope = f.newRun(t, uuid.New())
	return f
}

// newRun creates a tenant (when new), a user and a run, and returns the run's scope.
func (f *fixture) newRun(t *testing.T, tenantID uuid.UUID) events.Scope {
	t.Helper()
	scope := events.Scope{TenantID: tenantID, RunID: uuid.New()}
	err := f.db.InTx(context.Background(), tenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantGetByID(ctx, tenantID); db.IsNoRows(err) {
			if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenantID, Name: "t-" + tenantID.String()[:8]}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		u, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: uuid.New(), Email: uuid.NewString() + "@example.com"})
		if err != nil {
			return err
		}
		_, err = tx.Q.RunInsert(ctx, dbsqlc.RunInsertParams{
			TenantID: tenantID, ID: scope.RunID, UserID: u.ID, Kind: "TASK", Status: "RUNNING", MaxAttempts: 1,
		})
		return err
	})
	require.NoError(t, err)
	return scope
}

// append stores events of the fixture's run in one transaction with p (f.pub publishes after
// commit, f.quiet stores only).
func (f *fixture) append(t *testing.T, p *events.Publisher, types ...string) []events.Event {
	t.Helper()
	news := make([]events.New, len(types))
	for i, typ := range types {
		news[i] = events.New{Type: typ, Data: map[string]any{"i": i}}
	}
	var out []events.Event
	err := f.db.InTx(context.Background(), f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		out, err = p.Append(ctx, tx, f.scope, news...)
		return err
	})
	require.NoError(t, err)
	return out
}

// src reads the fixture's run's stored events, counting the calls.
func (f *fixture) src(ctx context.Context, afterSeq, limit int) ([]events.Event, error) {
	f.sourceCalls.Add(1)
	var out []events.Event
	err := f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		out, err = events.List(ctx, tx, f.scope.TenantID, f.scope.RunID, afterSeq, limit)
		return err
	})
	return out, err
}

// stored returns the run's stored events.
func (f *fixture) stored(t *testing.T) []events.Event {
	t.Helper()
	evs, err := f.src(context.Background(), 0, 10000)
	require.NoError(t, err)
	return evs
}

// landed waits until the hub has handled everything f.pub published so far: a marker
// published after it on a tenant of its own reaches a subscriber of that tenant only after the
// hub's one Redis connection has delivered every earlier message.
func (f *fixture) landed(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	marker := uuid.New()
	sub, err := f.hub.Subscribe(ctx, marker, nil)
	require.NoError(t, err)
	defer sub.Close()
	f.pub.Publish(ctx, marker, events.Event{TenantID: marker, RunID: uuid.New(), Type: events.MessageDelta, Data: []byte(`{}`)})
	select {
	case <-sub.C:
	case <-ctx.Done():
		t.Fatal("the marker did not come back through the hub")
	}
}

// next reads one event from ch within timeout; ok is false when ch closed.
func next(t *testing.T, ch <-chan events.Event, timeout time.Duration) (events.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
		return events.Event{}, false
	}
}

// nothing checks that ch yields nothing for d.
func nothing(t *testing.T, ch <-chan events.Event, d time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("unexpected event %+v (open %v)", ev, ok)
	case <-time.After(d):
	}
}

// quiet reports whether ch yields nothing for d. Unlike nothing it does not stop the test, so
// it is safe inside a transaction (a test stopped there would leave the connection busy).
func quiet(ch <-chan events.Event, d time.Duration) bool {
	select {
	case <-ch:
		return false
	case <-time.After(d):
		return true
	}
}

func seqsOf(evs []events.Event) []int {
	out := make([]int, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func oneTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestAppendGaplessUnderConcurrency: 10 appenders × 20 transactions each get seqs 1..200, each
// exactly once, stored and published in order.
func TestAppendGaplessUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 0, f.src, same)
	require.NoError(t, err)

	const workers, each = 10, 20
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				err := f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
					evs, err := f.pub.Append(ctx, tx, f.scope, events.New{Type: events.ToolStarted, Data: map[string]any{"w": w, "i": i}})
					if err != nil {
						return err
					}
					mu.Lock()
					got = append(got, evs[0].Seq)
					mu.Unlock()
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	slices.Sort(got)
	require.Equal(t, oneTo(workers*each), got, "seqs handed out")
	require.Equal(t, oneTo(workers*each), seqsOf(f.stored(t)), "seqs stored")

	// A subscriber that attached before the first append sees 1..200 in order.
	var seen []int
	for len(seen) < workers*each {
		ev, ok := next(t, live, 10*time.Second)
		require.True(t, ok, "subscription closed after %v", seen)
		seen = append(seen, ev.Seq)
	}
	require.Equal(t, oneTo(workers*each), seen, "seqs delivered")
}

// TestAppendPublishesOnlyAfterCommit: nothing goes out before commit, nor after a rollback.
func TestAppendPublishesOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := f.hub.Subscribe(ctx, f.scope.TenantID, nil)
	require.NoError(t, err)
	defer sub.Close()

	rollback := errors.New("roll back")
	var seqs []int
	var silentBeforeCommit bool
	err = f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
		evs, err := f.pub.Append(ctx, tx, f.scope, events.New{Type: events.ToolStarted}, events.New{Type: events.ToolCompleted})
		if err != nil {
			return err
		}
		seqs, silentBeforeCommit = seqsOf(evs), quiet(sub.C, 200*time.Millisecond)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, []int{1, 2}, seqs)
	require.True(t, silentBeforeCommit, "published before commit")
	nothing(t, sub.C, 300*time.Millisecond) // nor after the rollback
	require.Empty(t, f.stored(t))

	// The same events committed are published, with the seqs the rollback gave back.
	err = f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := f.pub.Append(ctx, tx, f.scope, events.New{Type: events.ToolStarted}, events.New{Type: events.ToolCompleted})
		if err != nil {
			return err
		}
		silentBeforeCommit = quiet(sub.C, 200*time.Millisecond)
		return nil
	})
	require.NoError(t, err)
	require.True(t, silentBeforeCommit, "published before commit")
	for _, want := range []struct {
		seq int
		typ string
	}{{1, events.ToolStarted}, {2, events.ToolCompleted}} {
		ev, ok := next(t, sub.C, 5*time.Second)
		require.True(t, ok)
		require.Equal(t, want.seq, ev.Seq)
		require.Equal(t, want.typ, ev.Type)
		require.Equal(t, f.scope.RunID, ev.RunID)
	}

	// A savepoint that rolls back publishes nothing either, while its parent commits.
	var inner error
	err = f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
		inner = f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
			if _, err := f.pub.Append(ctx, tx, f.scope, events.New{Type: events.ToolFailed}); err != nil {
				return err
			}
			return rollback
		})
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, inner, rollback)
	nothing(t, sub.C, 300*time.Millisecond)
	require.Equal(t, []int{1, 2}, seqsOf(f.stored(t)))
}

// TestSubscribeRunRefillsGapsAndDropsDuplicates: live events 1, 2 come from Redis; 5 arriving
// after 2 makes the subscriber read 3 and 4 from Postgres; repeats are dropped; ephemeral events
// pass through; the terminal event ends the stream.
func TestSubscribeRunRefillsGapsAndDropsDuplicates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	replayed := make(chan struct{})
	var once sync.Once
	src := func(ctx context.Context, afterSeq, limit int) ([]events.Event, error) {
		defer once.Do(func() { close(replayed) })
		return f.src(ctx, afterSeq, limit)
	}
	live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 0, src, same)
	require.NoError(t, err)
	select {
	case <-replayed: // the initial replay (of nothing) is over: what follows is live
	case <-time.After(5 * time.Second):
		t.Fatal("no initial replay")
	}
	require.EqualValues(t, 1, f.sourceCalls.Load())

	// Seqs 1..5 in Postgres only; the test publishes some of them itself.
	stored := f.append(t, f.quiet, events.ExecutionStarted, events.MessageCompleted, events.ToolStarted, events.ToolCompleted, events.UsageRecorded)
	require.Equal(t, oneTo(5), seqsOf(stored))

	f.pub.Publish(ctx, f.scope.TenantID, stored[0])
	f.pub.Publish(ctx, f.scope.TenantID, stored[1])
	for _, want := range []int{1, 2} {
		ev, ok := next(t, live, 5*time.Second)
		require.True(t, ok)
		require.Equal(t, want, ev.Seq)
	}
	require.EqualValues(t, 1, f.sourceCalls.Load(), "1 and 2 should have come live, not from Postgres")

	// An ephemeral event of the run goes straight through; one of another run does not.
	other := f.newRun(t, f.scope.TenantID)
	delta := func(runID uuid.UUID, text string) events.Event {
		return events.Event{RunID: runID, TenantID: f.scope.TenantID, Type: events.MessageDelta, Data: []byte(fmt.Sprintf(`{"text":%q}`, text)), Timestamp: time.Now()}
	}
	f.pub.Publish(ctx, f.scope.TenantID, delta(other.RunID, "not mine"), delta(f.scope.RunID, "mine"))
	ev, ok := next(t, live, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, events.MessageDelta, ev.Type)
	require.Equal(t, 0, ev.Seq)
	require.JSONEq(t, `{"text":"mine"}`, string(ev.Data))

	// Seq 5 after 2: 3 and 4 are refilled from Postgres, in order, then 5, at once (well before
	// the idle refill, 3 s after the last event).
	f.pub.Publish(ctx, f.scope.TenantID, stored[4])
	for _, want := range []int{3, 4, 5} {
		ev, ok := next(t, live, 1500*time.Millisecond)
		require.True(t, ok)
		require.Equal(t, want, ev.Seq, "after a gap")
		require.Equal(t, stored[want-1].Type, ev.Type)
	}
	require.Greater(t, f.sourceCalls.Load(), int64(1), "the gap was not refilled from Postgres")

	// Duplicates (live repeats of delivered seqs) are dropped.
	f.pub.Publish(ctx, f.scope.TenantID, stored[1], stored[3], stored[4])
	f.pub.Publish(ctx, f.scope.TenantID, stored...)
	nothing(t, live, 300*time.Millisecond)

	// The terminal event is delivered once and ends the stream.
	term := f.append(t, f.pub, events.ExecutionCompleted)
	require.Equal(t, 6, term[0].Seq)
	f.pub.Publish(ctx, f.scope.TenantID, term[0]) // a duplicate of the terminal event too
	ev, ok = next(t, live, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, 6, ev.Seq)
	require.Equal(t, events.ExecutionCompleted, ev.Type)
	_, ok = next(t, live, 5*time.Second)
	require.False(t, ok, "the stream did not end after the terminal event")
}

// TestSubscribeRunReplayThenLive: a subscriber with afterSeq gets exactly the stored events
// after it, then live ones; afterSeq at a finished run's end completes at once.
func TestSubscribeRunReplayThenLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.append(t, f.pub, events.TaskQueued, events.ExecutionStarted, events.MessageCompleted, events.UsageRecorded)

	live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 2, f.src, same)
	require.NoError(t, err)
	for _, want := range []int{3, 4} {
		ev, ok := next(t, live, 5*time.Second)
		require.True(t, ok)
		require.Equal(t, want, ev.Seq)
	}
	nothing(t, live, 200*time.Millisecond)
	f.append(t, f.pub, events.TaskCompleted, events.ExecutionCompleted)
	for _, want := range []int{5, 6} {
		ev, ok := next(t, live, 5*time.Second)
		require.True(t, ok)
		require.Equal(t, want, ev.Seq)
	}
	_, ok := next(t, live, 5*time.Second)
	require.False(t, ok, "the stream did not end after the terminal event")

	// The run is over: resuming after any seq gives the rest and ends; resuming at the end
	// ends with nothing (it must not wait for events that will never come).
	for after := 0; after <= 6; after++ {
		live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, after, f.src, same)
		require.NoError(t, err)
		var got []int
		for {
			ev, ok := next(t, live, 5*time.Second)
			if !ok {
				break
			}
			got = append(got, ev.Seq)
		}
		want := []int{}
		for s := after + 1; s <= 6; s++ {
			want = append(want, s)
		}
		require.Equal(t, want, append([]int{}, got...), "afterSeq %d", after)
	}
}

// TestHubOverflowSignalsResync: a subscriber that does not read loses events from its buffer
// but is told to refill (durable) or counted (ephemeral).
func TestHubOverflowSignalsResync(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := f.hub.Subscribe(ctx, f.scope.TenantID, nil)
	require.NoError(t, err)
	defer sub.Close()

	// Ephemeral overflow: counted, no resync.
	deltas := make([]events.Event, 400)
	for i := range deltas {
		deltas[i] = events.Event{RunID: f.scope.RunID, TenantID: f.scope.TenantID, Type: events.MessageDelta, Data: []byte(`{}`)}
	}
	f.pub.Publish(ctx, f.scope.TenantID, deltas...)
	require.Eventually(t, func() bool { return f.hub.Dropped() > 0 }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-sub.Resync:
		t.Fatal("lost token deltas asked for a refill")
	default:
	}
	for len(sub.C) > 0 {
		<-sub.C
	}

	// Durable overflow: a resync.
	durable := make([]events.Event, 400)
	for i := range durable {
		durable[i] = events.Event{Seq: i + 1, RunID: f.scope.RunID, TenantID: f.scope.TenantID, Type: events.ToolStarted, Data: []byte(`{}`)}
	}
	f.pub.Publish(ctx, f.scope.TenantID, durable...)
	select {
	case <-sub.Resync:
	case <-time.After(5 * time.Second):
		t.Fatal("a subscriber that lost durable events was not told to refill")
	}
}

// TestSubscribeRunSlowReaderLosesNothing: a reader that falls far behind still gets every
// durable event, in order, through the resync refill (well before the idle refill would).
func TestSubscribeRunSlowReaderLosesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 0, f.src, same)
	require.NoError(t, err)

	// 1,000 events (100 transactions of 10), far more than the hub's and the stream's buffers;
	// the last is not terminal, so no later event would reveal a gap.
	types := make([]string, 10)
	for i := range types {
		types[i] = events.ToolCompleted
	}
	for range 100 {
		f.append(t, f.pub, types...)
	}
	f.landed(t) // the publishes reached the hub: its buffers overflowed
	callsBefore := f.sourceCalls.Load()

	start := time.Now()
	var got []int
	for len(got) < 1000 {
		ev, ok := next(t, live, 10*time.Second)
		require.True(t, ok)
		got = append(got, ev.Seq)
	}
	took := time.Since(start)
	require.Equal(t, oneTo(1000), got)
	require.Greater(t, f.sourceCalls.Load(), callsBefore, "events were lost but never refilled")
	// The idle refill comes after 3 s without events; the resync must have come first.
	require.Less(t, took, 2500*time.Millisecond, "the overflow was only recovered by the idle refill")
	nothing(t, live, 200*time.Millisecond)
}

// TestHubCloseEndsCleanly: Close returns promptly, later subscriptions fail, and streams end
// with their context.
func TestHubCloseEndsCleanly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hub := events.NewHub(f.rdb, f.prefix, f.log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live, err := events.SubscribeRun(ctx, hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 0, f.src, same)
	require.NoError(t, err)
	conv, err := hub.SubscribeConversation(ctx, f.scope.TenantID, uuid.New())
	require.NoError(t, err)

	closed := make(chan error, 1)
	go func() { closed <- hub.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Hub.Close did not return")
	}
	_, err = hub.Subscribe(context.Background(), uuid.New(), nil)
	require.Error(t, err, "subscribing on a closed hub")

	cancel()
	for _, ch := range []<-chan events.Event{live, conv} {
		for {
			_, ok := next(t, ch, 5*time.Second)
			if !ok {
				break
			}
		}
	}
}

// TestSubscribeChurnLeaksNoGoroutine: 100 subscribe/unsubscribe cycles (run streams ended by
// their context or their terminal event, conversation streams, raw subscribers) leave no
// goroutine behind. Not parallel: goleak sees the whole process.
func TestSubscribeChurnLeaksNoGoroutine(t *testing.T) {
	f := newFixture(t)
	f.append(t, f.pub, events.ExecutionStarted, events.MessageCompleted)
	finished := f.newRun(t, f.scope.TenantID)
	finishedSrc := func(ctx context.Context, afterSeq, limit int) ([]events.Event, error) {
		var out []events.Event
		err := f.db.InTx(ctx, finished.TenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			out, err = events.List(ctx, tx, finished.TenantID, finished.RunID, afterSeq, limit)
			return err
		})
		return out, err
	}
	err := f.db.InTx(context.Background(), finished.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := f.pub.Append(ctx, tx, finished, events.New{Type: events.ExecutionStarted}, events.New{Type: events.ExecutionCompleted})
		return err
	})
	require.NoError(t, err)

	cycle := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		switch i % 4 {
		case 0: // a live run stream, cancelled after its replay
			live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 0, f.src, same)
			require.NoError(t, err)
			for range 2 {
				_, ok := next(t, live, 5*time.Second)
				require.True(t, ok)
			}
			cancel()
			for range live {
			}
		case 1: // a finished run's stream ends by itself
			live, err := events.SubscribeRun(ctx, f.hub, finished.TenantID, finished.RunID, uuid.Nil, 0, finishedSrc, same)
			require.NoError(t, err)
			for range live {
			}
		case 2: // a conversation stream
			conv, err := f.hub.SubscribeConversation(ctx, f.scope.TenantID, uuid.New())
			require.NoError(t, err)
			cancel()
			for range conv {
			}
		case 3: // a raw subscriber of a tenant of its own (its channel subscribed and dropped)
			sub, err := f.hub.Subscribe(ctx, uuid.New(), nil)
			require.NoError(t, err)
			sub.Close()
		}
	}
	// Warm up: connection pools and the hub's Redis connection start their long-lived
	// goroutines before the baseline is taken.
	for i := range 8 {
		cycle(i)
	}
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	for i := range 100 {
		cycle(i)
	}
	goleak.VerifyNone(t, opts...)
}

// Publish does not wait for Redis: messages queue up and go out in the order they were
// published, many in one pipeline, and Flush waits until all are sent.
func TestPublishQueuesInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.rdb.Subscribe(ctx, events.Channel(f.prefix, f.scope.TenantID))
	defer sub.Close()
	_, err := sub.Receive(ctx) // subscribed
	require.NoError(t, err)
	counter := &publishCounter{}
	f.rdb.AddHook(counter)
	const n = 500
	for i := range n {
		f.pub.Publish(ctx, f.scope.TenantID, events.Event{RunID: f.scope.RunID, TenantID: f.scope.TenantID, Type: events.MessageDelta, Data: []byte(fmt.Sprintf(`{"index":%d}`, i))})
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, f.pub.Flush(fctx))
	require.EqualValues(t, n, counter.publishes.Load(), "every message was sent when Flush returned")
	require.Less(t, counter.roundTrips.Load(), int64(n), "messages queued meanwhile go out together")
	ch := sub.Channel()
	for i := range n {
		select {
		case m := <-ch:
			require.Contains(t, m.Payload, fmt.Sprintf(`"data":{"index":%d}`, i), "message %d out of order", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d not received", i)
		}
	}
}

// publishCounter counts PUBLISH commands and the round trips that carried them.
type publishCounter struct{ publishes, roundTrips atomic.Int64 }

func (c *publishCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *publishCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "publish" {
			c.publishes.Add(1)
			c.roundTrips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *publishCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if cmd.Name() == "publish" {
				n++
			}
		}
		if n > 0 {
			c.publishes.Add(int64(n))
			c.roundTrips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestStatementsThatStoreTheirEventsPublishThem: the events stored by the statement that
// acquires a run (execution.started, and task.started on the first attempt only) are the ones
// published after its commit: the same seqs after the run's earlier events, types, data and
// times.
func TestStatementsThatStoreTheirEventsPublishThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.append(t, f.pub, events.TaskQueued)
	sub, err := f.hub.Subscribe(ctx, f.scope.TenantID, nil)
	require.NoError(t, err)
	defer sub.Close()

	runs := run.NewService(f.db, f.pub, f.log)
	first, err := runs.Acquire(ctx, f.scope.TenantID, f.scope.RunID, "worker-a", 0)
	require.NoError(t, err)
	second, err := runs.Acquire(ctx, f.scope.TenantID, f.scope.RunID, "worker-b", 0)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2}, []int32{first.Attempt, second.Attempt})

	var published []events.Event
	for len(published) < 3 {
		select {
		case ev := <-sub.C:
			if ev.Seq > 1 { // task.queued's publication may come after the subscription
				published = append(published, ev)
			}
		case <-ctx.Done():
			t.Fatalf("published %d of 3 events", len(published))
		}
	}
	stored, err := f.src(ctx, 1, 100)
	require.NoError(t, err)
	require.Len(t, stored, 3)
	want := []struct {
		typ  string
		data string
	}{
		{events.ExecutionStarted, `{"attempt": 1, "kind": "TASK"}`},
		{events.TaskStarted, `{"kind": "TASK"}`},
		{events.ExecutionStarted, `{"attempt": 2, "kind": "TASK"}`},
	}
	for i, w := range want {
		for _, ev := range []events.Event{stored[i], published[i]} {
			require.Equal(t, i+2, ev.Seq)
			require.Equal(t, w.typ, ev.Type)
			require.JSONEq(t, w.data, string(ev.Data))
			require.Equal(t, f.scope.RunID, ev.RunID)
		}
		require.True(t, stored[i].Timestamp.Equal(published[i].Timestamp.Truncate(time.Microsecond)), "%s: stored %s, published %s",
			w.typ, stored[i].Timestamp, published[i].Timestamp)
	}
}

// A publisher that delivers to its own process's hub (DeliverLocally) hands its events to that
// hub's subscribers at once, without Redis, and to other processes' hubs through Redis; its own
// hub skips them when Redis brings them back, so each subscriber gets each event once, in order.
func TestPublisherDeliversToItsOwnHubOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	own := events.NewHub(f.rdb, f.prefix, f.log) // this process's; f.hub is another process's
	t.Cleanup(func() { _ = own.Close() })
	pub := events.NewPublisher(f.rdb, f.prefix, f.log)
	pub.DeliverLocally(own)
	// unreachable publishes to a Redis nobody can reach: only local delivery can carry its events.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	unreachable := events.NewPublisher(dead, f.prefix, f.log)
	unreachable.DeliverLocally(own)

	local, err := own.Subscribe(ctx, f.scope.TenantID, nil)
	require.NoError(t, err)
	defer local.Close()
	remote, err := f.hub.Subscribe(ctx, f.scope.TenantID, nil)
	require.NoError(t, err)
	defer remote.Close()

	delta := func(i int) events.Event {
		return events.Event{RunID: f.scope.RunID, TenantID: f.scope.TenantID, Type: events.MessageDelta, Data: []byte(fmt.Sprintf(`{"index":%d}`, i))}
	}
	index := func(ev events.Event) int {
		var d struct{ Index int }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		return d.Index
	}

	unreachable.Publish(ctx, f.scope.TenantID, delta(-1))
	ev, ok := next(t, local.C, time.Second)
	require.True(t, ok)
	require.Equal(t, -1, index(ev), "delivered locally while Redis cannot be reached")

	for i := range 3 {
		pub.Publish(ctx, f.scope.TenantID, delta(i))
	}
	require.NoError(t, pub.Flush(ctx))
	// Published after pub's messages reached Redis, by a publisher of no hub: once it arrives,
	// so have the echoes of pub's messages, which the own hub must have skipped.
	f.pub.Publish(ctx, f.scope.TenantID, delta(99))
	for _, sub := range []*events.Sub{local, remote} {
		var got []int
		for range 4 {
			ev, ok := next(t, sub.C, 10*time.Second)
			require.True(t, ok)
			got = append(got, index(ev))
		}
		require.Equal(t, []int{0, 1, 2, 99}, got)
	}
	nothing(t, remote.C, 200*time.Millisecond) // the unreachable publisher's event stayed local
	nothing(t, local.C, 200*time.Millisecond)
}

// TestConversationStreamEndsWithItsContext: a conversation stream is the hub's own channel;
// it gets the conversation's events in order, and once its context ends it is closed and
// taken out of the hub, so events published after it (delivered locally, where a send on the
// closed channel would panic) go nowhere.
func TestConversationStreamEndsWithItsContext(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hub := events.NewHub(f.rdb, f.prefix, f.log)
	t.Cleanup(func() { _ = hub.Close() })
	pub := events.NewPublisher(f.rdb, f.prefix, f.log)
	pub.DeliverLocally(hub)
	convID, otherID := uuid.New(), uuid.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv, err := hub.SubscribeConversation(ctx, f.scope.TenantID, convID)
	require.NoError(t, err)
	delta := func(conversation uuid.UUID, i int) events.Event {
		return events.Event{RunID: f.scope.RunID, TenantID: f.scope.TenantID, ConversationID: conversation, Type: events.MessageDelta, Data: []byte(fmt.Sprintf(`{"index":%d}`, i))}
	}
	for i := range 3 {
		pub.Publish(ctx, f.scope.TenantID, delta(otherID, -i), delta(convID, i))
	}
	for i := range 3 {
		ev, ok := next(t, conv, time.Second)
		require.True(t, ok)
		require.Equal(t, convID, ev.ConversationID)
		require.JSONEq(t, fmt.Sprintf(`{"index":%d}`, i), string(ev.Data))
	}

	cancel()
	for {
		if _, ok := next(t, conv, 5*time.Second); !ok {
			break
		}
	}
	pub.Publish(context.Background(), f.scope.TenantID, delta(convID, 3))
	require.NoError(t, pub.Flush(context.Background()))
}

// TestSubscribeRunSnapshotsAStreamingReply: a subscription joining after three token deltas of
// a reply went out (through Redis: another process's publisher) gets the replay, then one
// message.snapshot with their text and index, then only the deltas after it (a repeated one is
// dropped). Once the reply is stored, a new subscription gets no snapshot.
func TestSubscribeRunSnapshotsAStreamingReply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.append(t, f.pub, events.TaskQueued, events.ExecutionStarted)
	delta := func(index int, text string) events.Event {
		data, _ := json.Marshal(map[string]any{"callIndex": 0, "index": index, "text": text})
		return events.Event{RunID: f.scope.RunID, TenantID: f.scope.TenantID, Type: events.MessageDelta, Data: data, Timestamp: time.Now()}
	}
	f.pub.Publish(ctx, f.scope.TenantID, delta(0, "Hello"))
	f.pub.Publish(ctx, f.scope.TenantID, delta(1, ", wor"), delta(2, "ld"))
	require.NoError(t, f.pub.Flush(ctx))

	live, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 0, f.src, same)
	require.NoError(t, err)
	for _, want := range []int{1, 2} {
		ev, ok := next(t, live, 5*time.Second)
		require.True(t, ok)
		require.Equal(t, want, ev.Seq)
	}
	ev, ok := next(t, live, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, events.MessageSnapshot, ev.Type)
	require.Zero(t, ev.Seq)
	var snap events.Snapshot
	require.NoError(t, json.Unmarshal(ev.Data, &snap))
	require.Equal(t, events.Snapshot{CallIndex: 0, Index: 2, Text: "Hello, world"}, snap)

	f.pub.Publish(ctx, f.scope.TenantID, delta(2, "ld"), delta(3, "!"))
	ev, ok = next(t, live, 5*time.Second)
	require.True(t, ok)
	require.JSONEq(t, `{"callIndex":0,"index":3,"text":"!"}`, string(ev.Data), "the repeated delta 2 was dropped")

	err = f.db.InTx(ctx, f.scope.TenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := f.pub.Append(ctx, tx, f.scope, events.New{Type: events.MessageCompleted, Data: map[string]any{
			"role": "ASSISTANT", "callIndex": 0, "content": "Hello, world!"}})
		return err
	})
	require.NoError(t, err)
	ev, ok = next(t, live, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, events.MessageCompleted, ev.Type)
	require.NoError(t, f.pub.Flush(ctx))

	again, err := events.SubscribeRun(ctx, f.hub, f.scope.TenantID, f.scope.RunID, uuid.Nil, 2, f.src, same)
	require.NoError(t, err)
	ev, ok = next(t, again, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, 3, ev.Seq)
	nothing(t, again, 200*time.Millisecond)
	n, err := f.rdb.Exists(ctx, f.prefix+"agentry:stream:"+f.scope.RunID.String()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the stored reply cleared its stream")
}

// same hands SubscribeRun's events out as they are.
func same(e events.Event) events.Event { return e }
