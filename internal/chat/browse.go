package chat

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Message returns one of the tenant's messages; any other is NOT_FOUND.
func (s *Service) Message(ctx context.Context, id uuid.UUID) (dbsqlc.Message, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Message{}, err
	}
	var out dbsqlc.Message
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.MessageGet(ctx, dbsqlc.MessageGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("message")
	}
	return out, err
}

// MessagesBefore returns a conversation's last limit messages before a position (the newest
// when beforePosition is 0), in display order: what a chat shows first, then pages back from.
func (s *Service) MessagesBefore(ctx context.Context, conversationID uuid.UUID, beforePosition int64, limit int) ([]dbsqlc.Message, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Message
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.MessageListBefore(ctx, dbsqlc.MessageListBeforeParams{TenantID: a.TenantID, ConversationID: conversationID, BeforePosition: beforePosition, Lim: int32(limit)})
		return err
	})
	slices.Reverse(out)
	return out, err
}

// DeleteConversation deletes a conversation with its messages, runs, events, tool calls and
// approvals; the usage its runs recorded stays. Its owner may (MEMBER or higher), and the
// tenant's admins; another member gets FORBIDDEN, another tenant's conversation is NOT_FOUND.
// A conversation with a run that has not ended, or a question waiting for a person, is
// CONFLICT: cancel the run, or answer the question, first.
func (s *Service) DeleteConversation(ctx context.Context, id uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		conv, err := ownedForUpdate(ctx, tx, a, id, "delete")
		if err != nil {
			return err
		}
		b, err := tx.Q.ConversationBlockersOfDelete(ctx, dbsqlc.ConversationBlockersOfDeleteParams{TenantID: a.TenantID, ConversationID: uuid.NullUUID{UUID: id, Valid: true}})
		if err != nil {
			return err
		}
		switch {
		case b.UnendedRuns > 0:
			e := apperr.New(apperr.Conflict, "the conversation has %d run(s) that have not ended: cancel them (cancelRun) first", b.UnendedRuns)
			if conv.ActiveRunID.Valid {
				e = e.With("activeRunId", conv.ActiveRunID.UUID)
			}
			return e
		case b.PendingApprovals > 0:
			return apperr.New(apperr.Conflict, "a question about one of the conversation's runs waits for an answer (approvals(status: PENDING)): answer it first")
		}
		_, err = tx.Q.ConversationDelete(ctx, dbsqlc.ConversationDeleteParams{TenantID: a.TenantID, ID: id})
		return err
	})
}
