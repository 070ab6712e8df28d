package model

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// EncodeCursor makes an opaque page cursor from a kind and a value.
func EncodeCursor(kind, value string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + value))
}

// DecodeCursor reads the after cursor of kind; nil reads as "from the start". A malformed
// cursor is BAD_USER_INPUT.
func DecodeCursor(kind string, cursor *string) (string, error) {
	return decodeCursor("after", kind, cursor)
}

// decodeCursor reads the cursor of kind given as argument arg (after, before).
func decodeCursor(arg, kind string, cursor *string) (string, error) {
	if cursor == nil || *cursor == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(*cursor)
	k, v, ok := strings.Cut(string(raw), ":")
	if err != nil || !ok || k != kind {
		return "", apperr.Invalid(arg, "is not a cursor from this connection")
	}
	return v, nil
}

// UUIDCursor decodes a cursor holding an id (uuid.Nil for the start).
func UUIDCursor(kind string, cursor *string) (uuid.UUID, error) {
	v, err := DecodeCursor(kind, cursor)
	if err != nil || v == "" {
		return uuid.Nil, err
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, apperr.Invalid("after", "is not a cursor from this connection")
	}
	return id, nil
}

// IntCursor decodes an after cursor holding an integer (0 for the start).
func IntCursor(kind string, cursor *string) (int64, error) {
	return IntCursorArg("after", kind, cursor)
}

// IntCursorArg decodes a cursor holding an integer given as argument arg (0 when omitted).
func IntCursorArg(arg, kind string, cursor *string) (int64, error) {
	v, err := decodeCursor(arg, kind, cursor)
	if err != nil || v == "" {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, apperr.Invalid(arg, "is not a cursor from this connection")
	}
	return n, nil
}

// PageSize bounds a connection's first argument: default 20, at most 100.
func PageSize(first *int) (int, error) { return PageSizeArg("first", first) }

// PageSizeArg bounds a connection's page size given as argument arg (first, last): default 20,
// at most 100.
func PageSizeArg(arg string, n *int) (int, error) {
	if n == nil {
		return 20, nil
	}
	if *n < 0 || *n > 100 {
		return 0, apperr.Invalid(arg, "must be between 0 and 100")
	}
	return *n, nil
}

// Conversation is a conversation row.
type Conversation struct{ Row dbsqlc.Conversation }

func (c *Conversation) ID() string            { return EncodeID("Conversation", c.Row.ID) }
func (*Conversation) IsNode()                 {}
func (c *Conversation) GetID() string         { return c.ID() }
func (c *Conversation) Title() *string        { return c.Row.Title }
func (c *Conversation) Mode() ContextMode     { return ContextMode(c.Row.Mode) }
func (c *Conversation) Model() string         { return c.Row.Model }
func (c *Conversation) CreatedAt() time.Time  { return c.Row.CreatedAt }
func (c *Conversation) Agentic() bool         { return c.Row.Agentic }
func (c *Conversation) ProjectID() string     { return EncodeID("Project", c.Row.ProjectID) }
func (c *Conversation) SystemPrompt() *string { return nonEmpty(c.Row.SystemPrompt) }
func (c *Conversation) Visibility() ConversationVisibility {
	return ConversationVisibility(c.Row.Visibility)
}

// Message is a message row.
type Message struct{ Row dbsqlc.Message }

func (m *Message) ID() string           { return EncodeID("Message", m.Row.ID) }
func (*Message) IsNode()                {}
func (m *Message) GetID() string        { return m.ID() }
func (m *Message) Role() MessageRole    { return MessageRole(m.Row.Role) }
func (m *Message) Content() string      { return m.Row.Content }
func (m *Message) Parts() JSON          { return JSON(m.Row.Parts) }
func (m *Message) CreatedAt() time.Time { return m.Row.CreatedAt }

// Run is a run row.
type Run struct{ Row dbsqlc.Run }

func (r *Run) ID() string                  { return EncodeID("Run", r.Row.ID) }
func (*Run) IsNode()                       {}
func (r *Run) GetID() string               { return r.ID() }
func (r *Run) Kind() RunKind               { return RunKind(r.Row.Kind) }
func (r *Run) Status() RunStatus           { return RunStatus(r.Row.Status) }
func (r *Run) Attempt() int                { return int(r.Row.Attempt) }
func (r *Run) MaxAttempts() int            { return int(r.Row.MaxAttempts) }
func (r *Run) Turns() int                  { return int(r.Row.Turns) }
func (r *Run) Error() *string              { return r.Row.Error }
func (r *Run) TerminationReason() *string  { return r.Row.TerminationReason }
func (r *Run) InputTokens() int64          { return r.Row.InputTokens }
func (r *Run) OutputTokens() int64         { return r.Row.OutputTokens }
func (r *Run) CostMicros() int64           { return r.Row.CostMicros }
func (r *Run) CreatedAt() time.Time        { return r.Row.CreatedAt }
func (r *Run) StartedAt() *time.Time       { return r.Row.StartedAt }
func (r *Run) FinishedAt() *time.Time      { return r.Row.FinishedAt }
func (r *Run) FailureClass() *FailureClass { return (*FailureClass)(r.Row.FailureClass) }
func (r *Run) Depth() int                  { return int(r.Row.Depth) }

// ToolCall is a tool call row.
type ToolCall struct{ Row dbsqlc.ToolCall }

func (c *ToolCall) ID() string      { return EncodeID("ToolCall", c.Row.ID) }
func (*ToolCall) IsNode()           {}
func (c *ToolCall) GetID() string   { return c.ID() }
func (c *ToolCall) Name() string    { return c.Row.Name }
func (c *ToolCall) Arguments() JSON { return JSON(c.Row.Arguments) }
func (c *ToolCall) Status() string  { return string(c.Row.Status) }
func (c *ToolCall) Risk() int       { return int(c.Row.Risk) }
func (c *ToolCall) Output() *string { return c.Row.Output }
func (c *ToolCall) Error() *string  { return c.Row.Error }

// RunEvent is an event envelope. Its data names objects by global id (EventData).
type RunEvent struct{ Ev events.Event }

func (e *RunEvent) Seq() int             { return e.Ev.Seq }
func (e *RunEvent) RunID() string        { return EncodeID("Run", e.Ev.RunID) }
func (e *RunEvent) Type() string         { return e.Ev.Type }
func (e *RunEvent) Data() JSON           { return JSON(EventData(e.Ev.Data)) }
func (e *RunEvent) Timestamp() time.Time { return e.Ev.Timestamp }
func (e *RunEvent) Phase() *string       { return nonEmpty(e.Ev.Phase) }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var _ graphql.Marshaler = JSON(nil)
