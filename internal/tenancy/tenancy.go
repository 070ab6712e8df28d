// Package tenancy manages tenants, their members and platform admins. Every operation acts in the
// caller's tenant; another tenant's objects read as not found.
package tenancy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/mail"
)

// Service is the tenancy domain.
type Service struct {
	db *db.DB
	// Mail sends invitations; nil sends nothing. PublicURL is the web app's address, which the
	// links in them start with. Log logs what could not be sent (nil: slog's default).
	Mail      mail.Sender
	PublicURL string
	Log       *slog.Logger
	// OnMemberChange, when set, runs once a member's role changed or they were removed
	// (after the commit), with the member's tenant and user: what ends the sessions they hold
	// open at once hooks in here. Nil: nothing runs.
	OnMemberChange func(tenantID, userID uuid.UUID)
	// OnPlanChange, when set, runs once a plan's limits or a tenant's plan changed (after the
	// commit): the rate limiter forgets the plans it read. Nil: nothing runs.
	OnPlanChange func()
}

// NewService returns the tenancy service.
func NewService(d *db.DB) *Service { return &Service{db: d} }

// Member is a user's membership in a tenant, or a pending invitation (Pending): then User holds
// the invited email and the invitation's id, and InvitationToken (set only when the invitation
// is made) is what the invited person accepts it with. JoinedAt is when the membership (or
// invitation) was made.
type Member struct {
	User            dbsqlc.User
	Role            auth.Role
	Pending         bool
	InvitationToken string
	JoinedAt        time.Time
}

// Viewer is the caller: their user, tenant and role.
type Viewer struct {
	User   dbsqlc.User
	Tenant dbsqlc.Tenant
	Role   auth.Role
}

// Tenant returns the caller's tenant.
func (s *Service) Tenant(ctx context.Context) (dbsqlc.Tenant, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Tenant{}, err
	}
	var t dbsqlc.Tenant
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		t, err = tx.Q.TenantGetByID(ctx, a.TenantID)
		return err
	})
	if db.IsNoRows(err) {
		return t, apperr.NotFoundf("tenant")
	}
	return t, err
}

// TenantByID returns a tenant by id if it is the caller's; any other id is NOT_FOUND.
func (s *Service) TenantByID(ctx context.Context, id uuid.UUID) (dbsqlc.Tenant, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Tenant{}, err
	}
	if id != a.TenantID {
		return dbsqlc.Tenant{}, apperr.NotFoundf("tenant")
	}
	return s.Tenant(ctx)
}

// User returns a user who is a member of the caller's tenant; anyone else is NOT_FOUND.
func (s *Service) User(ctx context.Context, id uuid.UUID) (dbsqlc.User, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.User{}, err
	}
	var u dbsqlc.User
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: a.TenantID, UserID: id}); err != nil {
			return err
		}
		u, err = tx.Q.UserGetByID(ctx, id)
		return err
	})
	if db.IsNoRows(err) {
		return u, apperr.NotFoundf("user")
	}
	return u, err
}

// AddMember invites email to the caller's tenant with role: an invitation (a new token for an
// address invited before) whose link is emailed to the address. Nobody joins without the
// token (auth.Service.AcceptInvitation, by a signed-in person whose verified email is the
// invited one), no account is made for an address without one, and the answer is the same
// whether the address has an account or not: a pending member carrying the invited email, the
// invitation's id and its token (shown once). ADMIN or higher; only an OWNER may invite an
// OWNER.
func (s *Service) AddMember(ctx context.Context, email string, role auth.Role) (Member, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return Member{}, err
	}
	email, err = auth.ValidateEmail("email", email)
	if err != nil {
		return Member{}, err
	}
	if err := grantable(a, role); err != nil {
		return Member{}, err
	}
	token, hash := auth.NewInvitationToken()
	var m Member
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		tenant, err := tx.Q.TenantGetByID(ctx, a.TenantID)
		if err != nil {
			return fmt.Errorf("load tenant: %w", err)
		}
		inv, err := tx.Q.InvitationUpsert(ctx, dbsqlc.InvitationUpsertParams{
			TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), Email: email, Role: string(role), TokenHash: hash,
			InvitedBy: uuid.NullUUID{UUID: a.UserID, Valid: true}, ExpiresAt: time.Now().Add(auth.InvitationTokenTTL),
		})
		if err != nil {
			return fmt.Errorf("store invitation: %w", err)
		}
		m = Member{User: dbsqlc.User{ID: inv.ID, Email: inv.Email}, Role: role, Pending: true, InvitationToken: token, JoinedAt: inv.CreatedAt}
		link := auth.Link(s.PublicURL, "/accept-invitation", token)
		tx.AfterCommit(func() {
			mail.SendLater(ctx, s.Mail, s.Log, mail.Message{To: email, Subject: "You are invited to " + tenant.Name + " on agentry",
				Text: "You are invited to join " + tenant.Name + " on agentry as " + string(role) + ".\n\nOpen this link to accept (it works for 14 days; sign up or log in with this address first):\n\n" + link + "\n\nIf you do not know why you received this, ignore it: nobody joins without this link.\n"})
		})
		return nil
	})
	return m, err
}

// GrantPlatformAdmin makes the user with email a platform admin (or revokes it). It is an
// operator command, not an API operation.
func (s *Service) GrantPlatformAdmin(ctx context.Context, email string, grant bool) (dbsqlc.User, error) {
	u, err := s.db.Q.UserSetPlatformAdmin(ctx, dbsqlc.UserSetPlatformAdminParams{Email: strings.TrimSpace(email), IsPlatformAdmin: grant})
	if db.IsNoRows(err) {
		return u, fmt.Errorf("no user with email %q", email)
	}
	return u, err
}

// UsersByIDs returns the caller's tenant's users among ids (others are absent from the map).
func (s *Service) UsersByIDs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]dbsqlc.User, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]dbsqlc.User, len(ids))
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.UserListByIDsInTenant(ctx, dbsqlc.UserListByIDsInTenantParams{TenantID: a.TenantID, Ids: ids})
		for _, r := range rows {
			out[r.ID] = r
		}
		return err
	})
	return out, err
}
