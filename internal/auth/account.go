package auth

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// sessionOnly refuses callers that authenticated with an API key: what follows acts on the
// person's account, which a key made for scripting does not hold.
func sessionOnly(ctx context.Context, what string) (Actor, error) {
	a, err := Require(ctx, RoleViewer)
	if err != nil {
		return a, err
	}
	if a.APIKeyID != uuid.Nil {
		return a, apperr.New(apperr.Forbidden, "an API key cannot %s: log in as the person", what)
	}
	return a, nil
}

// ChangePassword sets the caller's password after checking the current one, revokes every
// session of theirs in every tenant, and opens a new one in the current tenant, which it
// returns. A logged-in person only (an API key is FORBIDDEN); a wrong current password is
// BAD_USER_INPUT naming currentPassword.
func (s *Service) ChangePassword(ctx context.Context, current, next string) (Session, error) {
	a, err := sessionOnly(ctx, "change a password")
	if err != nil {
		return Session{}, err
	}
	if n := utf8.RuneCountInString(next); n < 8 || len(next) > 256 {
		return Session{}, apperr.Invalid("newPassword", "must be 8 to 256 characters long")
	}
	user, err := s.db.Q.UserGetByID(ctx, a.UserID)
	if err != nil {
		return Session{}, fmt.Errorf("load user: %w", err)
	}
	var encoded string
	if user.PasswordHash != nil {
		encoded = *user.PasswordHash
	}
	ok, err := s.passwords.Verify(ctx, current, encoded)
	if err != nil {
		return Session{}, fmt.Errorf("verify password: %w", err)
	}
	if !ok {
		return Session{}, apperr.Invalid("currentPassword", "is not the account's password")
	}
	hash, err := s.passwords.Hash(ctx, next)
	if err != nil {
		return Session{}, fmt.Errorf("hash password: %w", err)
	}
	var sess Session
	err = s.db.InSystemTx(ctx, "changePassword: revoke the user's sessions in every tenant", func(ctx context.Context, tx *db.Tx) error {
		if err := tx.Q.UserSetPassword(ctx, dbsqlc.UserSetPasswordParams{ID: a.UserID, PasswordHash: &hash}); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if _, err := tx.Q.RefreshTokenRevokeAllOfUser(ctx, a.UserID); err != nil {
			return fmt.Errorf("revoke sessions: %w", err)
		}
		tx.AfterCommit(func() { s.Changed(ctx, uuid.Nil, a.UserID) })
		sess, err = s.startSession(ctx, tx, a, uuid.Must(uuid.NewV7()))
		return err
	})
	if err != nil {
		return Session{}, err
	}
	s.log.InfoContext(ctx, "password changed; every session revoked", "user_id", a.UserID.String(), "tenant_id", a.TenantID.String())
	return sess, nil
}

// SwitchTenant spends the caller's refresh token (as refreshSession does) and opens a session in
// another of the user's tenants, for a tenant switcher. A tenant the user has not joined is
// NOT_FOUND, like a missing one; an invalid refresh token is UNAUTHENTICATED.
func (s *Service) SwitchTenant(ctx context.Context, refreshToken string, tenantID uuid.UUID) (Session, error) {
	row, err := s.findRefresh(ctx, refreshToken)
	if err != nil {
		return Session{}, err
	}
	var (
		target dbsqlc.Membership
		user   dbsqlc.User
	)
	err = s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		target, err = tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: tenantID, UserID: row.UserID})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("tenant")
		}
		if err != nil {
			return fmt.Errorf("load membership: %w", err)
		}
		user, err = tx.Q.UserGetByID(ctx, row.UserID)
		return err
	})
	if err != nil {
		return Session{}, err
	}
	// The presented session is spent (its family continues nowhere); reuse revokes it.
	if err := s.spend(ctx, refreshToken, func(context.Context, *db.Tx, dbsqlc.RefreshToken) error { return nil }); err != nil {
		return Session{}, err
	}
	actor := Actor{UserID: row.UserID, TenantID: tenantID, Role: Role(target.Role), PlatformAdmin: user.IsPlatformAdmin}
	var sess Session
	err = s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		sess, err = s.startSession(ctx, tx, actor, uuid.Must(uuid.NewV7()))
		return err
	})
	return sess, err
}
