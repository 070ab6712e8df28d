package chat

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// ConversationPatch changes some of a conversation's settings; nil fields stay as they are. An
// empty title clears it.
type ConversationPatch struct {
	Title, Mode, SystemPrompt *string
	Agentic                   *bool
}

// UpdateConversation changes a conversation's title, context mode, system prompt or whether
// tools are offered. Its owner may (MEMBER or higher), and the tenant's admins; another member
// gets FORBIDDEN, another tenant's conversation is NOT_FOUND. The changes apply from the
// conversation's next model call (a new mode's summarisation prompt when the summary is next
// extended).
func (s *Service) UpdateConversation(ctx context.Context, id uuid.UUID, p ConversationPatch) (dbsqlc.Conversation, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Conversation{}, err
	}
	params := dbsqlc.ConversationUpdateParams{TenantID: a.TenantID, ID: id, Mode: p.Mode, SystemPrompt: p.SystemPrompt}
	if p.Title != nil {
		t := strings.TrimSpace(*p.Title)
		if utf8.RuneCountInString(t) > 500 {
			return dbsqlc.Conversation{}, apperr.Invalid("title", "must be at most 500 characters")
		}
		params.Title = &t
	}
	if p.Mode != nil && !slices.Contains(Modes, *p.Mode) {
		return dbsqlc.Conversation{}, apperr.Invalid("mode", "must be one of %s", strings.Join(Modes, ", "))
	}
	if p.SystemPrompt != nil && len(*p.SystemPrompt) > 100_000 {
		return dbsqlc.Conversation{}, apperr.Invalid("systemPrompt", "must be at most 100000 bytes")
	}
	if p.Agentic != nil {
		params.Agentic = pgtype.Bool{Bool: *p.Agentic, Valid: true}
	}
	var out dbsqlc.Conversation
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := ownedForUpdate(ctx, tx, a, id, "change"); err != nil {
			return err
		}
		out, err = tx.Q.ConversationUpdate(ctx, params)
		return err
	})
	return out, err
}

// ownedForUpdate locks conversation id of a's tenant for a change (verb) that only its owner or
// an admin may make: another member is FORBIDDEN, another tenant's conversation NOT_FOUND.
func ownedForUpdate(ctx context.Context, tx *db.Tx, a auth.Actor, id uuid.UUID, verb string) (dbsqlc.Conversation, error) {
	conv, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: a.TenantID, ID: id})
	if db.IsNoRows(err) {
		return conv, apperr.NotFoundf("conversation")
	}
	if err != nil {
		return conv, err
	}
	if conv.UserID != a.UserID && !a.Role.AtLeast(auth.RoleAdmin) {
		return conv, apperr.New(apperr.Forbidden, "only the conversation's owner or an admin may %s it", verb)
	}
	return conv, nil
}

// Visibilities of a conversation: PRIVATE (its owner's alone, the default) or TENANT (shared
// with the tenant: every member reads it, MEMBER and above write in it).
const (
	VisibilityPrivate = "PRIVATE"
	VisibilityTenant  = "TENANT"
)

// SetVisibility shares a conversation with the tenant (TENANT) or makes it its owner's alone
// again (PRIVATE). Only its owner may (MEMBER or higher); another member who sees it (shared)
// is FORBIDDEN, one who does not is NOT_FOUND.
func (s *Service) SetVisibility(ctx context.Context, id uuid.UUID, visibility string) (dbsqlc.Conversation, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Conversation{}, err
	}
	if visibility != VisibilityPrivate && visibility != VisibilityTenant {
		return dbsqlc.Conversation{}, apperr.Invalid("visibility", "must be PRIVATE or TENANT")
	}
	var out dbsqlc.Conversation
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		conv, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("conversation")
		}
		if err != nil {
			return err
		}
		if conv.UserID != a.UserID {
			return apperr.New(apperr.Forbidden, "only the conversation's owner may change who sees it")
		}
		out, err = tx.Q.ConversationSetVisibility(ctx, dbsqlc.ConversationSetVisibilityParams{TenantID: a.TenantID, ID: id, Visibility: visibility})
		return err
	})
	return out, err
}
