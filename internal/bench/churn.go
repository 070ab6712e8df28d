package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// churnWorkers open and close the connections of SUBS-CHURN concurrently.
const churnWorkers = 16

// churnSources are the loopback addresses the connections come from: a closed connection's
// port stays in TIME_WAIT for a minute, and one source address has about 28,000 ports.
const churnSources = 8

// measureChurn: SUBS-CHURN — WebSocket connections opened (connection_init, connection_ack)
// and closed, o.Connections of them; the process's heap after a collection and its goroutines
// must come back to where they were before (heap within 10%, goroutines at most where they
// were). Both sides run in this process, so whatever either keeps of a closed connection shows.
func measureChurn(ctx context.Context, e *env, rep *Report) error {
	token := e.sessions[0].token
	// The baseline is taken once the process is steady after a warm-up of a tenth of the
	// connections at the same concurrency: its pools then hold the connections the churn needs
	// (each pgx connection keeps a statement cache of about half a MiB, a tenth of the heap here).
	steady(ctx)
	if _, err := churn(ctx, e.baseURL, token, e.o.Connections/10); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	steady(ctx)
	heap0, g0 := settledHeap(ctx, 0)
	start := time.Now()
	failed, err := churn(ctx, e.baseURL, token, e.o.Connections)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	heap1, g1 := settledHeap(ctx, g0)
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	rep.Checks = append(rep.Checks,
		Check{Measure: "SUBS-CHURN", Name: "SUBS-CHURN heap", Unit: "MiB", Baseline: mib(heap0), Agentry: mib(heap1),
			Ratio: float64(heap1) / float64(heap0), Goal: "<= 1.10x before", Status: pass(float64(heap1) <= 1.10*float64(heap0)),
			Note: fmt.Sprintf("%d connections in %s, %d failed", e.o.Connections, elapsed.Round(time.Second), failed)},
		Check{Measure: "SUBS-CHURN", Name: "SUBS-CHURN goroutines", Unit: "", Baseline: float64(g0), Agentry: float64(g1),
			Ratio: float64(g1) / float64(g0), Goal: "<= before", Status: pass(g1 <= g0)},
	)
	rep.Extra["SUBS-CHURN connections/s"] = float64(e.o.Connections) / elapsed.Seconds()
	return nil
}

// steady waits (at most 30 s) until the process's goroutine count has not changed for 2 s: its
// background services have started (River's maintenance among them, which its client starts
// once elected leader, each service after a jittered delay), so that the baseline holds them.
func steady(ctx context.Context) {
	deadline := time.Now().Add(30 * time.Second)
	n, since := runtime.NumGoroutine(), time.Now()
	for time.Since(since) < 2*time.Second && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		}
	}
}

// settledHeap collects garbage and returns the live heap and the goroutine count, once the
// goroutine count is at most want (0: at once), or after 30 s.
func settledHeap(ctx context.Context, want int) (uint64, int) {
	deadline := time.Now().Add(30 * time.Second)
	for want > 0 && runtime.NumGoroutine() > want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.GC() // the first collection runs the finalizers that free what the second collects
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

// churn opens n authenticated WebSockets to baseURL and closes each with the close handshake,
// churnWorkers at a time. failed counts connections that did not complete; an error is returned
// when more than 1% of them failed.
func churn(ctx context.Context, baseURL, token string, n int) (failed int64, err error) {
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/graphql"
	hello, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}})
	var next, bad atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range churnWorkers {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+w%churnSources))}
		client := &http.Client{Transport: &http.Transport{
			DialContext:       (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: src}).DialContext,
			DisableKeepAlives: true,
		}}
		wg.Go(func() {
			defer client.CloseIdleConnections()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if err := churnOne(ctx, client, url, hello); err != nil {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return bad.Load(), err
	}
	if bad.Load()*100 > int64(n) {
		return bad.Load(), fmt.Errorf("%d of %d connections failed, the first: %v", bad.Load(), n, firstErr.Load())
	}
	return bad.Load(), nil
}

// churnOne opens one socket, authenticates it, and closes it.
func churnOne(ctx context.Context, client *http.Client, url string, hello []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: client})
	if err != nil {
		return err
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, hello); err != nil {
		return err
	}
	_, raw, err := c.Read(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(string(raw), `"connection_ack"`) {
		return errors.New("expected connection_ack, got " + string(raw))
	}
	return c.Close(websocket.StatusNormalClosure, "")
}
