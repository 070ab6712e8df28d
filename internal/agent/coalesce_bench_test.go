package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/events"
)

// BenchmarkCoalescer streams a 500-token reply through the delta coalescer, which publishes
// to the test Redis (its own channel prefix, nobody listening): the first token at once, then
// one message.delta per 16 tokens. It reports the PUBLISH calls per reply; each reply waits
// until its deltas are sent (the publisher queues them).
func BenchmarkCoalescer(b *testing.B) {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		b.Skipf("no Redis at %s: %v", url, err)
	}
	var publishes atomic.Int64
	rdb.AddHook(countPublish{&publishes})
	pub := events.NewPublisher(rdb, fmt.Sprintf("bench%d:", os.Getpid()), slog.New(slog.DiscardHandler))
	scope := events.Scope{TenantID: uuid.Must(uuid.NewV7()), RunID: uuid.Must(uuid.NewV7()), ConversationID: uuid.Must(uuid.NewV7())}
	const tokens = 500
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := newCoalescer(pub, scope, 0)
		for range tokens {
			c.add(ctx, " alpha")
		}
		c.flush(ctx)
		if err := pub.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(publishes.Load())/float64(b.N), "publishes/reply")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
}

type countPublish struct{ n *atomic.Int64 }

func (countPublish) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countPublish) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "publish" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countPublish) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "publish" {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}
