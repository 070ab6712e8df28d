package usage_test

import (
	"context"
	"testing"

	"github.com/agentry/agentry/internal/usage"
)

// BenchmarkReserveSettle is a model call's budget work against the real Postgres: the
// reservation before the call (its own fenced transaction) and the settlement in the
// transaction that stores the call's usage record, under a tenant budget and a user budget.
func BenchmarkReserveSettle(b *testing.B) {
	if testing.Short() {
		b.Skip("needs Postgres")
	}
	t := setup(b)
	t.setBudget(b, usage.SetBudget{Scope: usage.ScopeTenant, Period: usage.PeriodMonth, TokenLimit: ptr(int64(1e15)), CostLimitMicros: ptr(int64(1e15))})
	t.setBudget(b, usage.SetBudget{Scope: usage.ScopeUser, UserID: t.member, Period: usage.PeriodDay, TokenLimit: ptr(int64(1e15))})
	l := t.lease(b, t.member)
	ctx := context.Background()
	req := request(100)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		held, err := t.svc.Reserve(ctx, l, i, model, req)
		if err != nil || !held {
			b.Fatalf("reserve call %d: held %v, %v", i, held, err)
		}
		if err := t.complete(b, l, i, 80, 20); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
