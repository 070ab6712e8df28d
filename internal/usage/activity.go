package usage

import (
	"context"
	"strings"

	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/events"
)

// IsActivity reports whether an event belongs on the tenant activity feed: run status changes
// (task.* and execution.*) and budget events. Token deltas, messages and tool calls do not.
func IsActivity(e events.Event) bool {
	return strings.HasPrefix(e.Type, "task.") || strings.HasPrefix(e.Type, "execution.") || strings.HasPrefix(e.Type, "budget.")
}

// Activity streams the live activity events of the caller's tenant (ADMIN or higher) from hub
// until ctx ends. It does not replay: a run's own events can be replayed with runEvents.
func (s *Service) Activity(ctx context.Context, hub *events.Hub) (<-chan events.Event, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return nil, err
	}
	sub, err := hub.Subscribe(ctx, a.TenantID, IsActivity)
	if err != nil {
		return nil, err
	}
	out := make(chan events.Event, 64)
	go func() {
		defer close(out)
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.Resync:
				// Live feed only: a lost event is not refilled (runs replay through runEvents).
			case e := <-sub.C:
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
