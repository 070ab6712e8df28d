package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	netmail "net/mail"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/mail"
)

// RefreshTokenTTL is how long a refresh token (and so a session without activity) lives.
const RefreshTokenTTL = 30 * 24 * time.Hour

// Service signs users up and in, rotates sessions and manages API keys.
type Service struct {
	db        *db.DB
	passwords *Passwords
	tokens    *Tokens
	log       *slog.Logger
	cur       *current
	bus       atomic.Pointer[changeBus]
	// Mail sends verification and password-reset links; nil sends nothing.
	Mail mail.Sender
	// PublicURL is the web app's address, which the links in emails start with.
	PublicURL string
	// OnSignUp, when set, runs inside the sign-up transaction after the tenant exists (other
	// domains create the tenant's defaults there, e.g. its default project).
	OnSignUp func(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) error
}

// NewService returns the auth service.
func NewService(d *db.DB, passwords *Passwords, tokens *Tokens, log *slog.Logger) *Service {
	return &Service{db: d, passwords: passwords, tokens: tokens, log: log, cur: newCurrent()}
}

// Tokens returns the access-token service.
func (s *Service) Tokens() *Tokens { return s.tokens }

// Session is what signing up, logging in and refreshing return.
type Session struct {
	AccessToken  string
	RefreshToken string
	ExpiresAt    time.Time
	Actor        Actor
	// User and Tenant are the session's user and tenant as SignUp wrote them, for an answer
	// that needs no read; nil for other sessions.
	User   *dbsqlc.User
	Tenant *dbsqlc.Tenant
}

// SignUpInput is a new user with a new tenant. InvitationToken is ignored: an invitation is
// accepted with AcceptInvitation once the address is verified.
type SignUpInput struct {
	Email, Password, Name, TenantName, InvitationToken string
}

var errBadCredentials = apperr.New(apperr.Unauthenticated, "invalid email or password")

// ValidateEmail normalises and checks an email address.
func ValidateEmail(field, email string) (string, error) {
	email = strings.TrimSpace(email)
	addr, err := netmail.ParseAddress(email)
	if err != nil || addr.Address != email || len(email) > 320 {
		return "", apperr.Invalid(field, "must be a plain email address such as ada@example.com")
	}
	return email, nil
}

func validatePassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < 8 || len(pw) > 256 {
		return apperr.Invalid("password", "must be 8 to 256 characters long")
	}
	return nil
}

// SignUp creates a user and a tenant owned by them, and sends a link that verifies the address.
//
// An address that has an account answers the same from outside: the same work is done (the
// password hashed, the user, tenant, project, verification token and session written, an
// access token signed) in a transaction that is then rolled back, so nothing is stored and the
// account is not changed; the answer has the same shape (tokens, a viewer with the given
// address, OWNER of the given tenant name), and one email goes out as for a new account: to
// the account's holder, saying someone tried to sign up with the address and how to log in.
// The tokens of such an answer open nothing (their session was never stored): they are
// UNAUTHENTICATED on first use, as after a logout.
func (s *Service) SignUp(ctx context.Context, in SignUpInput) (Session, error) {
	email, err := ValidateEmail("email", in.Email)
	if err != nil {
		return Session{}, err
	}
	if err := validatePassword(in.Password); err != nil {
		return Session{}, err
	}
	tenantName := strings.TrimSpace(in.TenantName)
	if tenantName == "" || utf8.RuneCountInString(tenantName) > 200 {
		return Session{}, apperr.Invalid("tenantName", "must be 1 to 200 characters")
	}
	name := strings.TrimSpace(in.Name)
	if utf8.RuneCountInString(name) > 200 {
		return Session{}, apperr.Invalid("name", "must be at most 200 characters")
	}
	hash, err := s.passwords.Hash(ctx, in.Password)
	if err != nil {
		return Session{}, fmt.Errorf("hash password: %w", err)
	}
	sess, holder, err := s.signUpTx(ctx, email, name, tenantName, hash)
	if errors.Is(err, errSignUpRace) {
		// Another sign-up took the address between the lookup and the insert: the second
		// attempt finds its account.
		sess, holder, err = s.signUpTx(ctx, email, name, tenantName, hash)
	}
	if errors.Is(err, errAddressTaken) {
		s.log.InfoContext(ctx, "sign-up with an address that has an account: rolled back, its holder told", slog.String("user_id", holder.ID.String()))
		s.sendSignUpAttempt(ctx, holder)
		return sess, nil
	}
	return sess, err
}

// errAddressTaken rolls back a sign-up whose address has an account; errSignUpRace one whose
// address was taken after the lookup. Neither reaches a client.
var (
	errAddressTaken = errors.New("sign-up: the address has an account")
	errSignUpRace   = errors.New("sign-up: the address was taken during the sign-up")
)

// signUpTx writes a sign-up in one transaction. When the address has an account, the same rows
// are written under a stand-in address that nobody owns, and the transaction rolls back with
// errAddressTaken: the session (with the rows, the given address in place of the stand-in) and
// the account's holder are returned beside it.
func (s *Service) signUpTx(ctx context.Context, email, name, tenantName, hash string) (Session, dbsqlc.User, error) {
	tenantID := uuid.Must(uuid.NewV7())
	var (
		sess   Session
		holder dbsqlc.User
	)
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		existing, err := tx.Q.UserGetByEmail(ctx, email)
		taken := err == nil
		if err != nil && !db.IsNoRows(err) {
			return fmt.Errorf("find user: %w", err)
		}
		stored := email
		if taken {
			holder = existing
			stored = "signup-" + uuid.NewString() + "@stand-in.invalid"
		}
		user, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: uuid.Must(uuid.NewV7()), Email: stored, Name: nonEmpty(name), PasswordHash: &hash})
		if db.IsUniqueViolation(err, "users_email_key") {
			return errSignUpRace
		}
		if err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		tenant, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenantID, Name: tenantName})
		if err != nil {
			return fmt.Errorf("insert tenant: %w", err)
		}
		if _, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: tenantID, UserID: user.ID, Role: string(RoleOwner)}); err != nil {
			return fmt.Errorf("insert membership: %w", err)
		}
		if s.OnSignUp != nil {
			if err := s.OnSignUp(ctx, tx, tenantID, user.ID); err != nil {
				return err
			}
		}
		// A rolled-back transaction runs no AfterCommit: the stand-in's link is never sent.
		if err := s.sendVerification(ctx, tx, user); err != nil {
			return err
		}
		actor := Actor{UserID: user.ID, TenantID: tenantID, Role: RoleOwner, PlatformAdmin: user.IsPlatformAdmin}
		if sess, err = s.startSession(ctx, tx, actor, uuid.Must(uuid.NewV7())); err != nil {
			return err
		}
		user.Email = email
		sess.User, sess.Tenant = &user, &tenant
		if taken {
			return errAddressTaken
		}
		return nil
	})
	return sess, holder, err
}

// sendSignUpAttempt tells the holder of an account that someone tried to sign up with its
// address, and how to log in or choose a new password: the email a sign-up with a taken
// address sends instead of a verification link.
func (s *Service) sendSignUpAttempt(ctx context.Context, holder dbsqlc.User) {
	base := strings.TrimRight(s.PublicURL, "/")
	mail.SendLater(ctx, s.Mail, s.log, mail.Message{To: holder.Email, Subject: "Someone tried to sign up for agentry with your address",
		Text: "Someone, perhaps you, tried to create a new agentry account with this email address, which already has one. " +
			"Nothing was changed and no account was created.\n\nTo log in, open:\n\n" + base + "/login\n\n" +
			"If you forgot your password, choose a new one here:\n\n" + base + "/forgot-password\n\nIf it was not you, ignore this message.\n"})
}

// LogIn checks a password and opens a session in one of the user's tenants: tenantID when given,
// otherwise the tenant the user joined first.
func (s *Service) LogIn(ctx context.Context, email, password string, tenantID uuid.UUID) (Session, error) {
	user, err := s.db.Q.UserGetByEmail(ctx, strings.TrimSpace(email))
	if err != nil && !db.IsNoRows(err) {
		return Session{}, fmt.Errorf("find user: %w", err)
	}
	var encoded string
	if err == nil && user.PasswordHash != nil {
		encoded = *user.PasswordHash
	}
	ok, verr := s.passwords.Verify(ctx, password, encoded)
	if verr != nil {
		return Session{}, fmt.Errorf("verify password: %w", verr)
	}
	if !ok {
		return Session{}, errBadCredentials
	}
	var memberships []dbsqlc.Membership
	err = s.db.InSystemTx(ctx, "login: list the user's tenants", func(ctx context.Context, tx *db.Tx) error {
		memberships, err = tx.Q.MembershipListByUser(ctx, user.ID)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("list memberships: %w", err)
	}
	var chosen *dbsqlc.Membership
	for i := range memberships {
		if tenantID == uuid.Nil || memberships[i].TenantID == tenantID {
			chosen = &memberships[i]
			break
		}
	}
	if chosen == nil {
		if tenantID != uuid.Nil {
			return Session{}, apperr.NotFoundf("tenant")
		}
		return Session{}, apperr.New(apperr.Forbidden, "this account belongs to no tenant")
	}
	actor := Actor{UserID: user.ID, TenantID: chosen.TenantID, Role: Role(chosen.Role), PlatformAdmin: user.IsPlatformAdmin}
	var sess Session
	err = s.db.InTx(ctx, actor.TenantID, func(ctx context.Context, tx *db.Tx) error {
		sess, err = s.startSession(ctx, tx, actor, uuid.Must(uuid.NewV7()))
		return err
	})
	return sess, err
}

// startSession stores a new refresh token of family and issues an access token beside it.
func (s *Service) startSession(ctx context.Context, tx *db.Tx, a Actor, family uuid.UUID) (Session, error) {
	return s.startSessionWith(ctx, tx, a, family, newRefreshToken())
}

// startSessionWith is startSession with the refresh token given (a rotation's successor).
func (s *Service) startSessionWith(ctx context.Context, tx *db.Tx, a Actor, family uuid.UUID, refresh string) (Session, error) {
	err := tx.Q.RefreshTokenInsert(ctx, dbsqlc.RefreshTokenInsertParams{
		TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), FamilyID: family, UserID: a.UserID,
		TokenHash: hashSecret(refresh), ExpiresAt: time.Now().Add(RefreshTokenTTL),
	})
	if err != nil {
		return Session{}, fmt.Errorf("insert refresh token: %w", err)
	}
	a.SessionID = family
	access, exp, err := s.tokens.Issue(ctx, a)
	if err != nil {
		return Session{}, err
	}
	return Session{AccessToken: access, RefreshToken: refresh, ExpiresAt: exp, Actor: a}, nil
}

var errBadRefresh = apperr.New(apperr.Unauthenticated, "invalid or expired refresh token")

func (s *Service) findRefresh(ctx context.Context, token string) (dbsqlc.RefreshToken, error) {
	var row dbsqlc.RefreshToken
	if !strings.HasPrefix(token, refreshTokenPrefix) {
		return row, errBadRefresh
	}
	err := s.db.InSystemTx(ctx, "refresh: find the token's tenant", func(ctx context.Context, tx *db.Tx) error {
		var err error
		row, err = tx.Q.RefreshTokenGetByHash(ctx, hashSecret(token))
		return err
	})
	if db.IsNoRows(err) {
		return row, errBadRefresh
	}
	if err != nil {
		return row, fmt.Errorf("find refresh token: %w", err)
	}
	return row, nil
}

// refreshGrace is how long after a refresh token is spent that presenting it again still
// answers with the session its first use made (the same refresh token, a fresh access token):
// two tabs or two requests that refresh one session at the same moment both stay logged in.
const refreshGrace = 10 * time.Second

// Refresh rotates a refresh token: the presented token is spent and a new one of the same
// family returned with a new access token. The new token is derived from the spent one (an
// HMAC under the master key), so a repeat within refreshGrace answers with the same token while
// that one is unspent. Presenting a spent token later, or after its successor was spent, revokes
// the whole family (it was stolen).
func (s *Service) Refresh(ctx context.Context, token string) (Session, error) {
	next := s.tokens.keys.successor(token)
	var sess Session
	err := s.spendOr(ctx, token, func(ctx context.Context, tx *db.Tx, spent dbsqlc.RefreshToken) error {
		actor, err := s.sessionActor(ctx, tx, spent)
		if err != nil {
			return err
		}
		sess, err = s.startSessionWith(ctx, tx, actor, spent.FamilyID, next)
		return err
	}, func(ctx context.Context, tx *db.Tx, current dbsqlc.RefreshToken) (bool, error) {
		if time.Since(*current.RotatedAt) >= refreshGrace {
			return false, nil
		}
		succ, err := tx.Q.RefreshTokenGetByHash(ctx, hashSecret(next))
		if err != nil || succ.FamilyID != current.FamilyID || succ.RotatedAt != nil || succ.RevokedAt != nil || !succ.ExpiresAt.After(time.Now()) {
			return false, nil
		}
		actor, err := s.sessionActor(ctx, tx, current)
		if err != nil {
			return true, err
		}
		access, exp, err := s.tokens.Issue(ctx, actor)
		if err != nil {
			return true, err
		}
		sess = Session{AccessToken: access, RefreshToken: next, ExpiresAt: exp, Actor: actor}
		return true, nil
	})
	return sess, err
}

// sessionActor is who a refresh token's session acts as now: its user with their current role
// in its tenant. A membership that ended (or is still an unproven invitation) ends the session.
func (s *Service) sessionActor(ctx context.Context, tx *db.Tx, tok dbsqlc.RefreshToken) (Actor, error) {
	m, err := tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: tok.TenantID, UserID: tok.UserID})
	if db.IsNoRows(err) {
		return Actor{}, errBadRefresh
	}
	if err != nil {
		return Actor{}, fmt.Errorf("load membership: %w", err)
	}
	user, err := tx.Q.UserGetByID(ctx, tok.UserID)
	if err != nil {
		return Actor{}, fmt.Errorf("load user: %w", err)
	}
	return Actor{UserID: tok.UserID, TenantID: tok.TenantID, Role: Role(m.Role), PlatformAdmin: user.IsPlatformAdmin, SessionID: tok.FamilyID}, nil
}

// spend marks a live refresh token used and runs then in the same transaction (of the token's
// tenant). A token already spent revokes its whole family and is UNAUTHENTICATED, as is a
// missing, expired or revoked one.
func (s *Service) spend(ctx context.Context, token string, then func(ctx context.Context, tx *db.Tx, spent dbsqlc.RefreshToken) error) error {
	return s.spendOr(ctx, token, then, nil)
}

// spendOr is spend where repeat, when set, is first asked about a token already spent (and not
// revoked): when it answers true the presentation is a repeat it answered, not a reuse.
func (s *Service) spendOr(ctx context.Context, token string, then func(ctx context.Context, tx *db.Tx, spent dbsqlc.RefreshToken) error,
	repeat func(ctx context.Context, tx *db.Tx, current dbsqlc.RefreshToken) (bool, error)) error {
	row, err := s.findRefresh(ctx, token)
	if err != nil {
		return err
	}
	reused := false
	err = s.db.InTx(ctx, row.TenantID, func(ctx context.Context, tx *db.Tx) error {
		spent, err := tx.Q.RefreshTokenRotate(ctx, dbsqlc.RefreshTokenRotateParams{TenantID: row.TenantID, ID: row.ID})
		if db.IsNoRows(err) {
			current, err := tx.Q.RefreshTokenGetByHash(ctx, row.TokenHash)
			if err != nil || current.RotatedAt == nil || current.RevokedAt != nil {
				return errBadRefresh
			}
			if repeat != nil {
				if answered, err := repeat(ctx, tx, current); answered || err != nil {
					return err
				}
			}
			reused = true
			return errBadRefresh
		}
		if err != nil {
			return fmt.Errorf("rotate refresh token: %w", err)
		}
		return then(ctx, tx, spent)
	})
	if reused {
		s.log.WarnContext(ctx, "refresh token reuse: revoking the session family",
			slog.String("tenant_id", row.TenantID.String()), slog.String("family_id", row.FamilyID.String()))
		if rerr := s.revokeFamily(ctx, row); rerr != nil {
			return rerr
		}
		return apperr.New(apperr.Unauthenticated, "refresh token was already used; the session has been revoked, log in again")
	}
	return err
}

func (s *Service) revokeFamily(ctx context.Context, row dbsqlc.RefreshToken) error {
	return s.db.InTx(ctx, row.TenantID, func(ctx context.Context, tx *db.Tx) error {
		tx.AfterCommit(func() { s.Changed(ctx, row.TenantID, row.UserID) })
		return tx.Q.RefreshTokenRevokeFamily(ctx, dbsqlc.RefreshTokenRevokeFamilyParams{TenantID: row.TenantID, FamilyID: row.FamilyID})
	})
}

// LogOut revokes the session the refresh token belongs to. It answers the same whether or not
// the token was valid.
func (s *Service) LogOut(ctx context.Context, token string) error {
	row, err := s.findRefresh(ctx, token)
	if err != nil {
		if apperr.CodeOf(err) == apperr.Unauthenticated {
			return nil
		}
		return err
	}
	return s.revokeFamily(ctx, row)
}

// Authenticate resolves a bearer credential (an access token or an API key) to its actor, with
// the role its user holds now. The returned time is when the credential stops being valid
// (zero for API keys). An access token of a session that was logged out or revoked, or whose
// user left the tenant, is UNAUTHENTICATED.
func (s *Service) Authenticate(ctx context.Context, bearer string) (Actor, time.Time, error) {
	if strings.HasPrefix(bearer, apiKeyPrefix) {
		a, err := s.authenticateAPIKey(ctx, bearer)
		return a, time.Time{}, err
	}
	a, exp, err := s.tokens.Verify(ctx, bearer)
	if err != nil {
		return a, exp, err
	}
	a, err = s.currentActor(ctx, a)
	return a, exp, err
}

var errBadAPIKey = apperr.New(apperr.Unauthenticated, "invalid or revoked API key")

func (s *Service) authenticateAPIKey(ctx context.Context, secret string) (Actor, error) {
	prefix, ok := splitAPIKey(secret)
	if !ok {
		return Actor{}, errBadAPIKey
	}
	var row dbsqlc.APIKeyAuthenticateRow
	err := s.db.InSystemTx(ctx, "API key: find the key's tenant", func(ctx context.Context, tx *db.Tx) error {
		var err error
		row, err = tx.Q.APIKeyAuthenticate(ctx, prefix)
		return err
	})
	if db.IsNoRows(err) {
		return Actor{}, errBadAPIKey
	}
	if err != nil {
		return Actor{}, fmt.Errorf("find API key: %w", err)
	}
	if !equalHash(row.SecretHash, hashSecret(secret)) || row.RevokedAt != nil {
		return Actor{}, errBadAPIKey
	}
	role := Role(row.Role)
	if member := Role(row.MemberRole); !member.AtLeast(role) {
		role = member
	}
	return Actor{UserID: row.UserID, TenantID: row.TenantID, Role: role, PlatformAdmin: row.IsPlatformAdmin, APIKeyID: row.ID}, nil
}

// CreatedAPIKey is a new key with its secret, which is never retrievable again.
type CreatedAPIKey struct {
	Key    dbsqlc.ApiKey
	Secret string
}

// CreateAPIKey makes a key acting as the caller in the caller's tenant with a role no higher than
// the caller's. ADMIN or higher.
func (s *Service) CreateAPIKey(ctx context.Context, name string, role Role) (CreatedAPIKey, error) {
	a, err := Require(ctx, RoleAdmin)
	if err != nil {
		return CreatedAPIKey{}, err
	}
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return CreatedAPIKey{}, apperr.Invalid("name", "must be 1 to 100 characters")
	}
	if !role.Valid() {
		return CreatedAPIKey{}, apperr.Invalid("role", "must be one of OWNER, ADMIN, MEMBER, VIEWER")
	}
	if !a.Role.AtLeast(role) {
		return CreatedAPIKey{}, apperr.New(apperr.Forbidden, "cannot create a key with a role above your own (%s)", a.Role)
	}
	secret, prefix := newAPIKey()
	var out CreatedAPIKey
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		// The role that counts is the membership's as this key is made, not the one the
		// credential was checked with a moment ago.
		m, err := tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: a.TenantID, UserID: a.UserID})
		if db.IsNoRows(err) {
			return errSessionEnded
		}
		if err != nil {
			return fmt.Errorf("load membership: %w", err)
		}
		if now := Role(m.Role); !now.AtLeast(RoleAdmin) || !now.AtLeast(role) {
			return apperr.New(apperr.Forbidden, "this operation needs the ADMIN role or higher, and a key's role cannot be above your own (%s)", now)
		}
		key, err := tx.Q.APIKeyInsert(ctx, dbsqlc.APIKeyInsertParams{
			TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), UserID: a.UserID, Name: name,
			Prefix: prefix, SecretHash: hashSecret(secret), Role: string(role),
		})
		if err != nil {
			return fmt.Errorf("insert API key: %w", err)
		}
		out = CreatedAPIKey{Key: key, Secret: secret}
		return nil
	})
	return out, err
}

// RevokeAPIKey revokes a key of the caller's tenant at once. ADMIN or higher. Revoking twice
// keeps the first revocation time.
func (s *Service) RevokeAPIKey(ctx context.Context, id uuid.UUID) (dbsqlc.ApiKey, error) {
	a, err := Require(ctx, RoleAdmin)
	if err != nil {
		return dbsqlc.ApiKey{}, err
	}
	var key dbsqlc.ApiKey
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		key, err = tx.Q.APIKeyRevoke(ctx, dbsqlc.APIKeyRevokeParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("API key")
		}
		if err == nil {
			tx.AfterCommit(func() { s.Changed(ctx, a.TenantID, key.UserID) })
		}
		return err
	})
	return key, err
}

// ListAPIKeys lists the tenant's keys, newest first. ADMIN or higher.
func (s *Service) ListAPIKeys(ctx context.Context) ([]dbsqlc.ApiKey, error) {
	a, err := Require(ctx, RoleAdmin)
	if err != nil {
		return nil, err
	}
	var keys []dbsqlc.ApiKey
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		keys, err = tx.Q.APIKeyListByTenant(ctx, a.TenantID)
		return err
	})
	return keys, err
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// IsUnauthenticated reports whether err is an authentication failure.
func IsUnauthenticated(err error) bool {
	var e *apperr.Error
	return errors.As(err, &e) && e.Code == apperr.Unauthenticated
}

// GetAPIKey returns one of the tenant's keys. ADMIN or higher; another tenant's key is NOT_FOUND.
func (s *Service) GetAPIKey(ctx context.Context, id uuid.UUID) (dbsqlc.ApiKey, error) {
	a, err := Require(ctx, RoleAdmin)
	if err != nil {
		return dbsqlc.ApiKey{}, err
	}
	var key dbsqlc.ApiKey
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		key, err = tx.Q.APIKeyGet(ctx, dbsqlc.APIKeyGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return key, apperr.NotFoundf("API key")
	}
	return key, err
}
