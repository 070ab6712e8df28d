package contextwin

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

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

// Read is what Build reads: the conversation's project and its open tasks (Project nil when
// there is none), and the memories recalled.
type Read struct {
	Project *dbsqlc.Project
	Tasks   []dbsqlc.Task
	Mems    []dbsqlc.Memory
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
	// The project, its tasks and the memories are read together (one round trip).
	var rd Read
	var reads []func(context.Context, *db.Tx) error
	if in.ProjectID != uuid.Nil {
		reads = append(reads, func(ctx context.Context, tx *db.Tx) error {
			p, err := tx.Q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: in.TenantID, ID: in.ProjectID})
			if err != nil {
				return fmt.Errorf("load project: %w", err)
			}
			rd.Project = &p
			return nil
		}, func(ctx context.Context, tx *db.Tx) (err error) {
			if rd.Tasks, err = tx.Q.ContextProjectTasks(ctx, dbsqlc.ContextProjectTasksParams{TenantID: in.TenantID, ProjectID: in.ProjectID, Lim: MaxTasks}); err != nil {
				return fmt.Errorf("load tasks: %w", err)
			}
			return nil
		})
	}
	reads = append(reads, func(ctx context.Context, tx *db.Tx) (err error) {
		rd.Mems, err = memory.Recall(ctx, tx, memory.Scope{TenantID: in.TenantID, UserID: in.UserID, ProjectID: in.ProjectID}, in.Query, MaxRecalled, tokens)
		return err
	})
	if err := tx.Pipeline(ctx, reads...); err != nil {
		return "", err
	}
	return Compose(in.Mode, rd), nil
}

// ReadsOfRun are Build's reads for run runID (its conversation's project, the memories recalled
// by the message that started it), keyed by the run alone, as Pipeline functions filling rd:
// they can go to Postgres in the round trip that acquires the run.
func ReadsOfRun(rd *Read, tenantID, runID uuid.UUID) []func(context.Context, *db.Tx) error {
	return []func(context.Context, *db.Tx) error{
		func(ctx context.Context, tx *db.Tx) error {
			p, err := tx.Q.ProjectGetOfRun(ctx, dbsqlc.ProjectGetOfRunParams{TenantID: tenantID, RunID: runID})
			if db.IsNoRows(err) {
				return nil // a run without a conversation
			}
			if err != nil {
				return fmt.Errorf("load project: %w", err)
			}
			rd.Project = &p
			return nil
		}, func(ctx context.Context, tx *db.Tx) (err error) {
			if rd.Tasks, err = tx.Q.ContextProjectTasksOfRun(ctx, dbsqlc.ContextProjectTasksOfRunParams{TenantID: tenantID, RunID: runID, Lim: MaxTasks}); err != nil {
				return fmt.Errorf("load tasks: %w", err)
			}
			return nil
		}, func(ctx context.Context, tx *db.Tx) (err error) {
			rd.Mems, err = memory.RecallOfRun(ctx, tx, tenantID, runID, MaxRecalled, DefaultMemoryTokens)
			return err
		},
	}
}

// ReadsOfConversation are ReadsOfRun for the run a message (query) of user userID starts in
// conversation conversationID, keyed by the conversation: they can go to Postgres in the round
// trip that locks it, before the run exists.
func ReadsOfConversation(rd *Read, tenantID, userID, conversationID uuid.UUID, query string) []func(context.Context, *db.Tx) error {
	return []func(context.Context, *db.Tx) error{
		func(ctx context.Context, tx *db.Tx) error {
			p, err := tx.Q.ProjectGetOfConversation(ctx, dbsqlc.ProjectGetOfConversationParams{TenantID: tenantID, ConversationID: conversationID})
			if db.IsNoRows(err) {
				return nil // no such conversation: the caller's own read says so
			}
			if err != nil {
				return fmt.Errorf("load project: %w", err)
			}
			rd.Project = &p
			return nil
		}, func(ctx context.Context, tx *db.Tx) (err error) {
			if rd.Tasks, err = tx.Q.ContextProjectTasksOfConversation(ctx, dbsqlc.ContextProjectTasksOfConversationParams{TenantID: tenantID, ConversationID: conversationID, Lim: MaxTasks}); err != nil {
				return fmt.Errorf("load tasks: %w", err)
			}
			return nil
		}, func(ctx context.Context, tx *db.Tx) (err error) {
			rd.Mems, err = memory.RecallOfConversation(ctx, tx, tenantID, userID, conversationID, query, MaxRecalled, DefaultMemoryTokens)
			return err
		},
	}
}

// Compose is Build's text from what it read, for a conversation in mode.
func Compose(mode string, rd Read) string {
	var parts []string
	if s := ModeInstruction(mode); s != "" {
		parts = append(parts, s)
	}
	if rd.Project != nil {
		parts = append(parts, projectInfo(*rd.Project, rd.Tasks))
	}
	if len(rd.Mems) > 0 {
		var b strings.Builder
		b.WriteString("What you remember about this user and project (from earlier conversations; use it when it is relevant):")
		for _, m := range rd.Mems {
			b.WriteString("\n- " + m.Content)
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "\n\n")
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
