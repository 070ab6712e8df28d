package run

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// Get returns one of the tenant's runs; any other is NOT_FOUND.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Run{}, err
	}
	var r dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		r, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return r, apperr.NotFoundf("run")
	}
	return r, err
}

// Filter selects runs for List.
type Filter struct {
	After    uuid.UUID
	Limit    int
	Statuses []string
	Kinds    []string
}

// List returns the tenant's runs, newest first: every run for ADMIN and above, the caller's own
// runs otherwise.
func (s *Service) List(ctx context.Context, f Filter) ([]dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var user uuid.NullUUID
	if !a.Role.AtLeast(auth.RoleAdmin) {
		user = uuid.NullUUID{UUID: a.UserID, Valid: true}
	}
	var out []dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RunList(ctx, dbsqlc.RunListParams{
			TenantID: a.TenantID, After: f.After, Statuses: nonNil(f.Statuses), Kinds: nonNil(f.Kinds), UserID: user, Lim: int32(f.Limit),
		})
		return err
	})
	return out, err
}

// ListByConversation returns a conversation's runs, newest first.
func (s *Service) ListByConversation(ctx context.Context, conversationID, after uuid.UUID, limit int) ([]dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RunListByConversation(ctx, dbsqlc.RunListByConversationParams{
			TenantID: a.TenantID, ConversationID: uuid.NullUUID{UUID: conversationID, Valid: true}, After: after, Lim: int32(limit),
		})
		return err
	})
	return out, err
}

// Events returns a run's stored events after afterSeq.
func (s *Service) Events(ctx context.Context, runID uuid.UUID, afterSeq, limit int) ([]events.Event, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	return s.EventSource(a.TenantID, runID)(ctx, afterSeq, limit)
}

// EventSource reads a run's stored events for subscriptions.
func (s *Service) EventSource(tenantID, runID uuid.UUID) events.Source {
	return func(ctx context.Context, afterSeq, limit int) ([]events.Event, error) {
		var out []events.Event
		err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			out, err = events.List(ctx, tx, tenantID, runID, afterSeq, limit)
			return err
		})
		return out, err
	}
}

// ToolCalls returns a run's tool calls in the order they were made.
func (s *Service) ToolCalls(ctx context.Context, runID uuid.UUID) ([]dbsqlc.ToolCall, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.ToolCall
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ToolCallListByRun(ctx, dbsqlc.ToolCallListByRunParams{TenantID: a.TenantID, RunID: runID})
		return err
	})
	return out, err
}

// ToolCall returns one of the tenant's tool calls; any other is NOT_FOUND.
func (s *Service) ToolCall(ctx context.Context, id uuid.UUID) (dbsqlc.ToolCall, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.ToolCall{}, err
	}
	var out dbsqlc.ToolCall
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ToolCallGet(ctx, dbsqlc.ToolCallGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("tool call")
	}
	return out, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MayControl says whether actor a may control run r (pause, resume, stop, cancel, interrupt it,
// decide its approvals and rollback question): its user may, and so may an ADMIN or OWNER when
// the run's conversation is shared with the tenant. Anyone else who can see r is FORBIDDEN
// (those who cannot see it never get it: row-level security answers NOT_FOUND first).
func MayControl(ctx context.Context, tx *db.Tx, a auth.Actor, r dbsqlc.Run, verb string) error {
	if r.UserID == a.UserID {
		return nil
	}
	if a.Role.AtLeast(auth.RoleAdmin) && r.ConversationID.Valid {
		shared, err := tx.Q.ConversationShared(ctx, dbsqlc.ConversationSharedParams{TenantID: r.TenantID, ID: r.ConversationID.UUID})
		if err != nil {
			return err
		}
		if shared {
			return nil
		}
	}
	return apperr.New(apperr.Forbidden, "only the run's user (or an admin, when its conversation is shared with the team) may %s it", verb)
}

// ContentVisible answers NOT_FOUND when the caller may see run r's record but not its content
// (an admin looking at a private conversation's run): its events stay private.
func (s *Service) ContentVisible(ctx context.Context, r dbsqlc.Run) error {
	var ok bool
	err := s.db.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		ok, err = tx.Q.RunContentVisible(ctx, dbsqlc.RunContentVisibleParams{TenantID: r.TenantID, RunID: r.ID})
		return err
	})
	if err == nil && !ok {
		return apperr.NotFoundf("run")
	}
	return err
}
