package contextwin

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/memory"
)

// Builder limits.
const (
	// DefaultMemoryTokens bounds the recalled memories in a system prompt.
	DefaultMemoryTokens = 500
	// MaxRecalled is the most memories recalled into one system prompt.
	MaxRecalled = 8
	// MaxTasks is the most open tasks listed in a system prompt.
	MaxTasks = 10
)

// BuildInput says whose context to build.
type BuildInput struct {
	TenantID, UserID, ProjectID uuid.UUID
	// Mode is the conversation's context mode.
	Mode string
	// Query is the new message: the memories relevant to it are recalled.
	Query string
	// MemoryTokens bounds the recalled memories (DefaultMemoryTokens when 0).
	MemoryTokens int
}

// Build assembles, in tx, what the system prompt says beyond the agent's own instructions
// (the user's preferences are those): the mode's instruction, the project (name, description,
// open tasks, most urgent first) and the user's memories relevant to the new message. Parts
// with nothing to say are left out.
func Build(ctx context.Context, tx *db.Tx, in BuildInput) (string, error) {
	tokens := in.MemoryTokens
	if tokens <= 0 {
		tokens = DefaultMemoryTokens
	}
	var (
		b     pgx.Batch
		parts []string
		p     dbsqlc.Project
		tasks []dbsqlc.Task
	)
	if s := ModeInstruction(in.Mode); s != "" {
		parts = append(parts, s)
	}
	if in.ProjectID != uuid.Nil {
		dbsqlc.QueueOne(&b, func(q *dbsqlc.Queries) (dbsqlc.Project, error) {
			return q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: in.TenantID, ID: in.ProjectID})
		}, &p)
		dbsqlc.QueueMany(&b, func(q *dbsqlc.Queries) ([]dbsqlc.Task, error) {
			return q.ContextProjectTasks(ctx, dbsqlc.ContextProjectTasksParams{TenantID: in.TenantID, ProjectID: in.ProjectID, Lim: MaxTasks})
		}, &tasks)
	}
	recalled := memory.QueueRecall(ctx, &b, memory.Scope{TenantID: in.TenantID, UserID: in.UserID, ProjectID: in.ProjectID}, in.Query, MaxRecalled, tokens)
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return "", fmt.Errorf("load project and memories: %w", err)
		}
	}
	if in.ProjectID != uuid.Nil {
		parts = append(parts, projectInfo(p, tasks))
	}
	mems := recalled()
	if len(mems) > 0 {
		var b strings.Builder
		b.WriteString("What you remember about this user and project (from earlier conversations; use it when it is relevant):")
		for _, m := range mems {
			b.WriteString("\n- " + m.Content)
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "\n\n"), nil
}

func projectInfo(p dbsqlc.Project, tasks []dbsqlc.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Project: %s", p.Name)
	if d := strings.TrimSpace(p.Description); d != "" {
		b.WriteString("\nDescription: " + clip(d, 2000))
	}
	if len(tasks) > 0 {
		b.WriteString("\nOpen tasks (most urgent first):")
		for _, t := range tasks {
			fmt.Fprintf(&b, "\n- [%s, %s] %s (%s)", t.Priority, t.Status, clip(t.Title, 300), t.Slug)
		}
	}
	return b.String()
}
