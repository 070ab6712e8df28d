package model

import (
	"time"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Approval is an approval row.
type Approval struct{ Row dbsqlc.Approval }

func (a *Approval) ID() string            { return EncodeID("Approval", a.Row.ID) }
func (*Approval) IsNode()                 {}
func (a *Approval) GetID() string         { return a.ID() }
func (a *Approval) Kind() string          { return a.Row.Kind }
func (a *Approval) Status() string        { return string(a.Row.Status) }
func (a *Approval) CreatedAt() time.Time  { return a.Row.CreatedAt }
func (a *Approval) DecidedAt() *time.Time { return a.Row.DecidedAt }
func (a *Approval) Question() *string     { return a.Row.Question }
func (a *Approval) ExpiresAt() time.Time  { return a.Row.ExpiresAt }
func (a *Approval) Note() *string         { return a.Row.Note }
