package bench

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// samples collects latencies; every sample is kept, percentiles come from all of them.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
	// errors counts operations that failed or never completed (they have no latency).
	errors atomic.Int64
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

func (s *samples) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}

// pct returns the p-th percentile (nearest rank, p in 0..100) in milliseconds.
func (s *samples) pct(p float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.d) == 0 {
		return math.NaN()
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	rank := int(math.Ceil(p/100*float64(len(d)))) - 1
	rank = min(max(rank, 0), len(d)-1)
	return float64(d[rank]) / float64(time.Millisecond)
}

// openLoop starts op at a constant rate for dur, each in its own goroutine, whatever the
// earlier ones are doing; op gets its intended start time and measures from it (so a stall
// shows as latency instead of silently lowering the load). It waits for the started ops, at
// most grace after the end.
func openLoop(ctx context.Context, rate float64, dur, grace time.Duration, op func(ctx context.Context, intended time.Time)) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(dur / interval)
	start := time.Now().Add(5 * time.Millisecond)
	var wg sync.WaitGroup
	opCtx, cancel := context.WithTimeout(ctx, dur+grace+time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			op(opCtx, at)
		}()
	}
	waitTimeout(&wg, time.Until(start.Add(dur+grace)))
}

// closedLoop runs workers that each repeat op back to back for dur and returns how many ops
// completed inside the window and the window's length. Ops still running at the end are
// waited for (up to grace) but not counted: this measures a throughput ceiling.
func closedLoop(ctx context.Context, workers int, dur, grace time.Duration, op func(ctx context.Context, worker int) error) (int64, time.Duration, int64) {
	var done, failed atomic.Int64
	start := time.Now()
	end := start.Add(dur)
	opCtx, cancel := context.WithTimeout(ctx, dur+grace)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && opCtx.Err() == nil {
				err := op(opCtx, w)
				if time.Now().After(end) {
					return
				}
				if err != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	waitTimeout(&wg, dur+grace)
	return done.Load(), dur, failed.Load()
}

// waitTimeout waits for wg for at most d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	select {
	case <-c:
		return true
	case <-time.After(max(d, 0)):
		return false
	}
}

// rate is a throughput accumulated over rounds.
type rate struct {
	n      int64
	window time.Duration
	failed int64
}

func (r *rate) add(n int64, window time.Duration, failed int64) {
	r.n += n
	r.window += window
	r.failed += failed
}

func (r *rate) perSecond() float64 {
	if r.window <= 0 {
		return math.NaN()
	}
	return float64(r.n) / r.window.Seconds()
}
