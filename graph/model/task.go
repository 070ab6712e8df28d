package model

import (
	"time"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Task is a task row.
type Task struct{ Row dbsqlc.Task }

func (t *Task) ID() string                  { return EncodeID("Task", t.Row.ID) }
func (*Task) IsNode()                       {}
func (t *Task) GetID() string               { return t.ID() }
func (t *Task) ProjectID() string           { return EncodeID("Project", t.Row.ProjectID) }
func (t *Task) Title() string               { return t.Row.Title }
func (t *Task) Description() *string        { return t.Row.Description }
func (t *Task) AcceptanceCriteria() *string { return t.Row.AcceptanceCriteria }
func (t *Task) Tags() []string              { return nonNilStrings(t.Row.Tags) }
func (t *Task) Source() string              { return t.Row.Source }
func (t *Task) Status() TaskStatus          { return TaskStatus(t.Row.Status) }
func (t *Task) Priority() TaskPriority      { return TaskPriority(t.Row.Priority) }
func (t *Task) Type() TaskType              { return TaskType(t.Row.Type) }
func (t *Task) Slug() string                { return t.Row.Slug }
func (t *Task) Complexity() Complexity      { return Complexity(t.Row.Complexity) }
func (t *Task) CreatedAt() time.Time        { return t.Row.CreatedAt }
func (t *Task) UpdatedAt() time.Time        { return t.Row.UpdatedAt }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
