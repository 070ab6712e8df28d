// Package memory keeps facts for a user across conversations: the remember tool stores them,
// the context builder recalls the ones relevant to a new message (Postgres full-text search,
// ranked), and users list and delete them. A memory belongs to one user in one project of one
// tenant; nobody else's context ever sees it.
package memory

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Limits.
const (
	// MaxContentChars bounds one memory (the table's CHECK matches).
	MaxContentChars = 2000
	// charsPerToken matches the context window's estimate.
	charsPerToken = 4
)

// Scope is whose memories: one user in one project of one tenant.
type Scope struct {
	TenantID, UserID, ProjectID uuid.UUID
}

// Remember stores content for the scope's user in tx (runID names the run that asked, or
// uuid.Nil). The same text remembered again keeps one memory. Empty or oversized content is
// BAD_USER_INPUT.
func Remember(ctx context.Context, tx *db.Tx, s Scope, content string, runID uuid.UUID) (dbsqlc.Memory, error) {
	content = strings.TrimSpace(content)
	if content == "" {
		return dbsqlc.Memory{}, apperr.Invalid("content", "must not be empty")
	}
	if n := utf8.RuneCountInString(content); n > MaxContentChars {
		return dbsqlc.Memory{}, apperr.Invalid("content", "has %d characters; at most %d are kept", n, MaxContentChars)
	}
	m, err := tx.Q.MemoryUpsert(ctx, dbsqlc.MemoryUpsertParams{
		TenantID: s.TenantID, ID: uuid.Must(uuid.NewV7()), UserID: s.UserID, ProjectID: s.ProjectID,
		Content: content, RunID: uuid.NullUUID{UUID: runID, Valid: runID != uuid.Nil},
	})
	if err != nil {
		return m, fmt.Errorf("remember: %w", err)
	}
	return m, nil
}

// Recall returns the scope's memories relevant to query (sharing words with it), best first:
// at most limit of them, and no more than fit in tokens (about 4 characters per token; the
// first always fits).
func Recall(ctx context.Context, tx *db.Tx, s Scope, query string, limit, tokens int) ([]dbsqlc.Memory, error) {
	var b pgx.Batch
	recalled := QueueRecall(ctx, &b, s, query, limit, tokens)
	if b.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	return recalled(), nil
}

// QueueRecall is Recall with its read queued in b (a system prompt's reads go together): the
// function it returns gives the memories once b's results are read.
func QueueRecall(ctx context.Context, b *pgx.Batch, s Scope, query string, limit, tokens int) func() []dbsqlc.Memory {
	if strings.TrimSpace(query) == "" || limit <= 0 {
		return func() []dbsqlc.Memory { return nil }
	}
	var rows []dbsqlc.MemoryRecallRow
	dbsqlc.QueueMany(b, func(q *dbsqlc.Queries) ([]dbsqlc.MemoryRecallRow, error) {
		return q.MemoryRecall(ctx, dbsqlc.MemoryRecallParams{
			TenantID: s.TenantID, UserID: s.UserID, ProjectID: s.ProjectID, Query: query, Lim: int32(limit),
		})
	}, &rows)
	return func() []dbsqlc.Memory { return fit(rows, tokens) }
}

// fit keeps the memories of rows (best first) that fit in tokens; the first always fits.
func fit(rows []dbsqlc.MemoryRecallRow, tokens int) []dbsqlc.Memory {
	var out []dbsqlc.Memory
	used := 0
	for _, r := range rows {
		cost := (len(r.Content) + charsPerToken - 1) / charsPerToken
		if len(out) > 0 && used+cost > tokens {
			break
		}
		used += cost
		out = append(out, dbsqlc.Memory{TenantID: r.TenantID, ID: r.ID, UserID: r.UserID, ProjectID: r.ProjectID,
			Content: r.Content, RunID: r.RunID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
	}
	return out
}

// Service is what users do with their memories (the GraphQL edge calls it).
type Service struct{ db *db.DB }

// NewService returns the memory service.
func NewService(d *db.DB) *Service { return &Service{db: d} }

// List returns the caller's memories, newest first, after the cursor id (uuid.Nil: from the
// start): in one project (uuid.Nil: every project), only those matching search when it is not
// empty (web-search syntax).
func (s *Service) List(ctx context.Context, projectID uuid.UUID, search string, after uuid.UUID, limit int) ([]dbsqlc.Memory, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Memory
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.MemoryList(ctx, dbsqlc.MemoryListParams{
			TenantID: a.TenantID, UserID: a.UserID, Project: projectID, Search: strings.TrimSpace(search), After: after, Lim: int32(limit),
		})
		return err
	})
	return out, err
}

// Delete removes one of the caller's memories; anyone else's (or a missing one) is NOT_FOUND.
func (s *Service) Delete(ctx context.Context, id uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		n, err := tx.Q.MemoryDelete(ctx, dbsqlc.MemoryDeleteParams{TenantID: a.TenantID, UserID: a.UserID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.NotFoundf("memory")
		}
		return nil
	})
}
