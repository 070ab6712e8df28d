package events

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Listen subscribes to a Redis channel and calls on with each message's payload until ctx ends.
// It returns once the subscription is confirmed. go-redis reconnects a dropped subscription;
// messages sent meanwhile are lost, so every later confirmation calls resubscribed (nil: none)
// for the listener to catch up from the source of truth.
func Listen(ctx context.Context, rdb redis.UniversalClient, channel string, on func(payload string), resubscribed func()) error {
	ps := rdb.Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return err
	}
	go func() {
		defer ps.Close()
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
		defer stop()
		for {
			m, err := ps.Receive(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				select { // go-redis reconnects on the next Receive
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" && resubscribed != nil {
					resubscribed()
				}
			case *redis.Message:
				on(m.Payload)
			}
		}
	}()
	return nil
}
