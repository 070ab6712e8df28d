// Package health checks the dependencies a process needs (Postgres, Redis, River's leader) for
// /readyz and the platformHealth query.
package health

import (
	"context"
	"sync"
	"time"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
)

// Check is one dependency's check; it returns nil when the dependency answers.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Component is the result of one Check.
type Component struct {
	Name    string
	OK      bool
	Latency time.Duration
	Error   string // why it failed; "" when OK
}

// Timeout bounds each check.
const Timeout = time.Second

// Run runs every check at once, each bounded by Timeout, and returns their results in the
// order of checks.
func Run(ctx context.Context, checks []Check) []Component {
	out := make([]Component, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, Timeout)
			defer cancel()
			start := time.Now()
			err := c.Check(cctx)
			out[i] = Component{Name: c.Name, OK: err == nil, Latency: time.Since(start)}
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

// Platform runs checks for a platform admin (platformHealth); anyone else is FORBIDDEN.
func Platform(ctx context.Context, checks []Check) ([]Component, error) {
	a, ok := auth.ActorFrom(ctx)
	if !ok {
		return nil, apperr.New(apperr.Unauthenticated, "authentication required")
	}
	if !a.PlatformAdmin {
		return nil, apperr.New(apperr.Forbidden, "platform admins only")
	}
	return Run(ctx, checks), nil
}
