package model

import (
	"time"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Memory is a memory row.
type Memory struct{ Row dbsqlc.Memory }

func (m *Memory) ID() string           { return EncodeID("Memory", m.Row.ID) }
func (m *Memory) Content() string      { return m.Row.Content }
func (m *Memory) ProjectID() string    { return EncodeID("Project", m.Row.ProjectID) }
func (m *Memory) CreatedAt() time.Time { return m.Row.CreatedAt }
func (m *Memory) UpdatedAt() time.Time { return m.Row.UpdatedAt }

// Summary is the conversation's running summary (nil until one is made).
func (c *Conversation) Summary() *string { return c.Row.Summary }
