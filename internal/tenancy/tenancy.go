// Package tenancy manages tenants, their members and platform admins. Every operation acts in the
// caller's tenant; another tenant's objects read as not found.
package tenancy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Service is the tenancy domain.
type Service struct {
	db *db.DB
	// OnMemberChange, when set, runs once a member's role changed or they were removed
	// (after the commit), with the member's tenant and user: what ends the sessions they hold
	// open at once hooks in here. Nil: nothing runs.
	OnMemberChange func(tenantID, userID uuid.UUID)
}

// NewService returns the tenancy service.
func NewService(d *db.DB) *Service { return &Service{db: d} }

// Member is a user's membership in a tenant. Pending is true while the invited person has not
// proven the invitation; InvitationToken (set only when the membership is made) is what they
// prove it with. JoinedAt is when the membership was made.
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

// AddMember adds the user with email to the caller's tenant with role. When no account has that
// email, a pending account and a pending membership are made, with an invitation token shown
// once: the person joins by signing up with the email and the token (or by acceptInvitation).
// ADMIN or higher; only an OWNER may add an OWNER.
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
	var m Member
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		user, err := tx.Q.UserGetByEmail(ctx, email)
		if db.IsNoRows(err) {
			user, err = tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: uuid.Must(uuid.NewV7()), Email: email})
		}
		if err != nil {
			return fmt.Errorf("find or invite user: %w", err)
		}
		// Someone without an account is invited: their membership waits for the token, so
		// whoever signs up with the email first cannot take the seat without it.
		var token string
		var tokenHash []byte
		if user.PasswordHash == nil {
			token, tokenHash = auth.NewInvitationToken()
		}
		mem, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: a.TenantID, UserID: user.ID, Role: string(role), InviteTokenHash: tokenHash})
		if err != nil {
			if db.IsUniqueViolation(err, "") {
				return apperr.New(apperr.Conflict, "%s is already a member of this tenant", email)
			}
			return fmt.Errorf("insert membership: %w", err)
		}
		m = member(mem, user)
		m.InvitationToken = token
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
