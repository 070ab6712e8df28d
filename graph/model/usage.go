package model

import (
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/usage"
)

// Budget is a budget with its current window's counters.
type Budget struct{ Row usage.Budget }

func (b *Budget) ID() string              { return EncodeID("Budget", b.Row.ID) }
func (*Budget) IsNode()                   {}
func (b *Budget) GetID() string           { return b.ID() }
func (b *Budget) Scope() BudgetScope      { return BudgetScope(b.Row.Scope) }
func (b *Budget) Period() BudgetPeriod    { return BudgetPeriod(b.Row.Period) }
func (b *Budget) TokenLimit() *int64      { return b.Row.TokenLimit }
func (b *Budget) CostLimitMicros() *int64 { return b.Row.CostLimitMicros }
func (b *Budget) SpentTokens() int64      { return b.Row.SpentTokens }
func (b *Budget) SpentMicros() int64      { return b.Row.SpentMicros }
func (b *Budget) ReservedTokens() int64   { return b.Row.ReservedTokens }
func (b *Budget) ReservedMicros() int64   { return b.Row.ReservedMicros }
func (b *Budget) PeriodStart() time.Time  { return b.Row.PeriodStart }

// User is the user of a USER budget (nil for a TENANT one).
func (b *Budget) User() *User {
	if b.Row.UserID == uuid.Nil {
		return nil
	}
	return &User{UserID: b.Row.UserID}
}

// User is the user the run works for (its fields load through the request's loader).
func (r *Run) User() *User { return &User{UserID: r.Row.UserID} }
