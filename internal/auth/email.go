package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/mail"
)

// The lifetimes of the tokens sent by email.
const (
	VerifyTokenTTL     = 48 * time.Hour
	ResetTokenTTL      = time.Hour
	InvitationTokenTTL = 14 * 24 * time.Hour
)

// The purposes of email tokens (email_tokens.purpose) and their prefixes.
const (
	purposeVerify = "VERIFY"
	purposeReset  = "RESET"
	verifyPrefix  = "agv_"
	resetPrefix   = "agp_"
)

// Link is the web app's address of path with the token: what an email asks its reader to open.
func Link(publicURL, path, token string) string {
	return strings.TrimRight(publicURL, "/") + path + "?token=" + url.QueryEscape(token)
}

// issueEmailToken stores a token of purpose for user's current address and returns it.
func issueEmailToken(ctx context.Context, tx *db.Tx, user dbsqlc.User, purpose, prefix string, ttl time.Duration) (string, error) {
	token := prefix + base64.RawURLEncoding.EncodeToString(randomBytes(32))
	err := tx.Q.EmailTokenInsert(ctx, dbsqlc.EmailTokenInsertParams{
		ID: uuid.Must(uuid.NewV7()), UserID: user.ID, Purpose: purpose, Email: user.Email,
		TokenHash: hashSecret(token), ExpiresAt: time.Now().Add(ttl),
	})
	if err != nil {
		return "", fmt.Errorf("store email token: %w", err)
	}
	return token, nil
}

// sendVerification stores a verification token for user and sends its link once tx commits.
func (s *Service) sendVerification(ctx context.Context, tx *db.Tx, user dbsqlc.User) error {
	token, err := issueEmailToken(ctx, tx, user, purposeVerify, verifyPrefix, VerifyTokenTTL)
	if err != nil {
		return err
	}
	link := Link(s.PublicURL, "/verify-email", token)
	tx.AfterCommit(func() {
		mail.SendLater(ctx, s.Mail, s.log, mail.Message{To: user.Email, Subject: "Verify your email address for agentry",
			Text: "Open this link to verify your email address (it works for 48 hours):\n\n" + link + "\n\nIf you did not sign up for agentry, ignore this message.\n"})
	})
	return nil
}

// RequestEmailVerification sends the logged-in person a new verification link (nothing when
// the address is verified already). Not with an API key.
func (s *Service) RequestEmailVerification(ctx context.Context) error {
	a, err := sessionOnly(ctx, "request an email verification")
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		user, err := tx.Q.UserGetByID(ctx, a.UserID)
		if err != nil {
			return fmt.Errorf("load user: %w", err)
		}
		if user.EmailVerifiedAt != nil {
			return nil
		}
		return s.sendVerification(ctx, tx, user)
	})
}

var errBadEmailToken = apperr.Invalid("token", "is not a valid link: it may have been used or have expired; ask for a new one")

// VerifyEmail proves the address a verification token was sent to. A token is used once; an
// unknown, used or expired one, or one sent to an address the account no longer has, is
// BAD_USER_INPUT.
func (s *Service) VerifyEmail(ctx context.Context, token string) error {
	if !strings.HasPrefix(token, verifyPrefix) {
		return errBadEmailToken
	}
	return s.db.InSystemTx(ctx, "verifyEmail: users and their email tokens belong to no tenant", func(ctx context.Context, tx *db.Tx) error {
		t, err := tx.Q.EmailTokenUse(ctx, dbsqlc.EmailTokenUseParams{TokenHash: hashSecret(token), Purpose: purposeVerify})
		if db.IsNoRows(err) {
			return errBadEmailToken
		}
		if err != nil {
			return fmt.Errorf("use email token: %w", err)
		}
		_, err = tx.Q.UserVerifyEmail(ctx, dbsqlc.UserVerifyEmailParams{ID: t.UserID, Email: t.Email})
		if db.IsNoRows(err) {
			return errBadEmailToken
		}
		return err
	})
}

// RequestPasswordReset sends a reset link to email when an account has that address. It
// answers (nil) once the address is well formed, before looking it up: the lookup, the token
// and the email happen in the background, so an address with an account and one without take
// the same path and the same time to answer. An address without an account gets no email.
func (s *Service) RequestPasswordReset(ctx context.Context, email string) error {
	email, err := ValidateEmail("email", email)
	if err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := s.sendPasswordReset(ctx, email); err != nil {
			s.log.WarnContext(ctx, "password reset request", slog.Any("error", err))
		}
	}()
	return nil
}

// sendPasswordReset stores a reset token for the account with email, if any, and sends its link
// once the token is committed.
func (s *Service) sendPasswordReset(ctx context.Context, email string) error {
	return s.db.InSystemTx(ctx, "requestPasswordReset: users and their email tokens belong to no tenant", func(ctx context.Context, tx *db.Tx) error {
		user, err := tx.Q.UserGetByEmail(ctx, email)
		if db.IsNoRows(err) || (err == nil && user.PasswordHash == nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find user: %w", err)
		}
		token, err := issueEmailToken(ctx, tx, user, purposeReset, resetPrefix, ResetTokenTTL)
		if err != nil {
			return err
		}
		link := Link(s.PublicURL, "/reset-password", token)
		tx.AfterCommit(func() {
			mail.SendLater(ctx, s.Mail, s.log, mail.Message{To: user.Email, Subject: "Reset your agentry password",
				Text: "Open this link to choose a new password (it works once, for an hour):\n\n" + link + "\n\nIf you did not ask for this, ignore this message: your password stays as it is.\n"})
		})
		return nil
	})
}

// ResetPassword sets a new password with a reset token: the token and every other reset link
// are spent, every session of the person in every tenant is revoked (their open streams end),
// and the address counts as verified (the link reached it). An unknown, used or expired token is
// BAD_USER_INPUT.
func (s *Service) ResetPassword(ctx context.Context, token, newPassword string) error {
	if err := validatePassword(newPassword); err != nil {
		return apperr.Invalid("newPassword", "must be 8 to 256 characters long")
	}
	if !strings.HasPrefix(token, resetPrefix) {
		return errBadEmailToken
	}
	hash, err := s.passwords.Hash(ctx, newPassword)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	return s.db.InSystemTx(ctx, "resetPassword: revoke the user's sessions in every tenant", func(ctx context.Context, tx *db.Tx) error {
		t, err := tx.Q.EmailTokenUse(ctx, dbsqlc.EmailTokenUseParams{TokenHash: hashSecret(token), Purpose: purposeReset})
		if db.IsNoRows(err) {
			return errBadEmailToken
		}
		if err != nil {
			return fmt.Errorf("use email token: %w", err)
		}
		if _, err := tx.Q.UserVerifyEmail(ctx, dbsqlc.UserVerifyEmailParams{ID: t.UserID, Email: t.Email}); db.IsNoRows(err) {
			return errBadEmailToken // the address changed since the link was sent
		} else if err != nil {
			return fmt.Errorf("verify email: %w", err)
		}
		if err := tx.Q.UserSetPassword(ctx, dbsqlc.UserSetPasswordParams{ID: t.UserID, PasswordHash: &hash}); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if err := tx.Q.EmailTokenSpendAllOfUser(ctx, dbsqlc.EmailTokenSpendAllOfUserParams{UserID: t.UserID, Purpose: purposeReset}); err != nil {
			return fmt.Errorf("spend reset links: %w", err)
		}
		if _, err := tx.Q.RefreshTokenRevokeAllOfUser(ctx, t.UserID); err != nil {
			return fmt.Errorf("revoke sessions: %w", err)
		}
		tx.AfterCommit(func() { s.Changed(ctx, uuid.Nil, t.UserID) })
		return nil
	})
}

// EmailVerified reports whether the caller's address is verified.
func (s *Service) EmailVerified(ctx context.Context) (bool, error) {
	a, err := Require(ctx, RoleViewer)
	if err != nil {
		return false, err
	}
	user, err := s.db.Q.UserGetByID(ctx, a.UserID)
	if err != nil {
		return false, fmt.Errorf("load user: %w", err)
	}
	return user.EmailVerifiedAt != nil, nil
}

// NewInvitationToken returns a fresh invitation token ("agi_...") and the hash to store.
func NewInvitationToken() (token string, hash []byte) {
	token = invitationPrefix + base64.RawURLEncoding.EncodeToString(randomBytes(32))
	return token, hashSecret(token)
}

const invitationPrefix = "agi_"

var errBadInvitation = apperr.New(apperr.NotFound, "invitation not found (it may have expired, been withdrawn, or be for another address)")

// AcceptInvitation joins the logged-in person to the tenant of an invitation, with its role.
// The person's verified email must be the invited address: an unverified address is FORBIDDEN;
// an unknown or expired token, or one for another address, is NOT_FOUND. An API key is
// FORBIDDEN. A member already keeps their role; the invitation is spent either way.
func (s *Service) AcceptInvitation(ctx context.Context, token string) error {
	a, err := sessionOnly(ctx, "accept an invitation")
	if err != nil {
		return err
	}
	user, err := s.db.Q.UserGetByID(ctx, a.UserID)
	if err != nil {
		return fmt.Errorf("load user: %w", err)
	}
	if user.EmailVerifiedAt == nil {
		return apperr.New(apperr.Forbidden, "verify your email address first (open the link we sent, or ask for a new one), then accept the invitation")
	}
	if !strings.HasPrefix(token, invitationPrefix) {
		return errBadInvitation
	}
	return s.db.InSystemTx(ctx, "acceptInvitation: the token names its tenant only through its row", func(ctx context.Context, tx *db.Tx) error {
		inv, err := tx.Q.InvitationGetByToken(ctx, hashSecret(token))
		if db.IsNoRows(err) {
			return errBadInvitation
		}
		if err != nil {
			return fmt.Errorf("find invitation: %w", err)
		}
		if !strings.EqualFold(inv.Email, user.Email) || !inv.ExpiresAt.After(time.Now()) {
			return errBadInvitation
		}
		if _, err := tx.Q.MembershipInsertIfAbsent(ctx, dbsqlc.MembershipInsertIfAbsentParams{TenantID: inv.TenantID, UserID: user.ID, Role: inv.Role}); err != nil {
			return fmt.Errorf("join tenant: %w", err)
		}
		if _, err := tx.Q.InvitationDelete(ctx, dbsqlc.InvitationDeleteParams{TenantID: inv.TenantID, ID: inv.ID}); err != nil {
			return fmt.Errorf("spend invitation: %w", err)
		}
		return nil
	})
}
