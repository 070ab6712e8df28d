package tenancy

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Members returns a page of the caller's tenant's members, pending invitations included, oldest
// account first, after the member with user id after (uuid.Nil: from the start). VIEWER or
// higher.
func (s *Service) Members(ctx context.Context, after uuid.UUID, limit int) ([]Member, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []Member
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.MembershipListPage(ctx, dbsqlc.MembershipListPageParams{TenantID: a.TenantID, After: after, Lim: int32(limit)})
		for _, r := range rows {
			out = append(out, Member{User: dbsqlc.User{ID: r.ID, Email: r.Email, Name: r.Name}, Role: auth.Role(r.Role), Pending: r.Pending, JoinedAt: r.CreatedAt})
		}
		return err
	})
	return out, err
}

// SetMemberRole changes a member's role. OWNER or ADMIN; an ADMIN can neither change an OWNER
// nor make one; the tenant's last OWNER cannot be demoted. Another tenant's user, or a missing
// one, is NOT_FOUND.
func (s *Service) SetMemberRole(ctx context.Context, userID uuid.UUID, role auth.Role) (Member, error) {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return Member{}, err
	}
	if err := grantable(a, role); err != nil {
		return Member{}, err
	}
	var out Member
	err = s.changeMember(ctx, a, userID, func(ctx context.Context, tx *db.Tx, a auth.Actor, m dbsqlc.Membership) error {
		if err := grantable(a, role); err != nil {
			return err
		}
		if m.Role == string(auth.RoleOwner) && role != auth.RoleOwner {
			if err := lastOwner(ctx, tx, a.TenantID, "demote"); err != nil {
				return err
			}
		}
		changed, err := tx.Q.MembershipSetRole(ctx, dbsqlc.MembershipSetRoleParams{TenantID: a.TenantID, UserID: userID, Role: string(role)})
		if err != nil {
			return fmt.Errorf("set role: %w", err)
		}
		u, err := tx.Q.UserGetByID(ctx, userID)
		out = member(changed, u)
		return err
	})
	return out, err
}

// RemoveMember takes a user out of the caller's tenant: their membership goes, and with it their
// sessions and API keys in the tenant are revoked (added again later, they start afresh). OWNER
// or ADMIN; an ADMIN cannot remove an OWNER; the tenant's last OWNER cannot be removed. The id
// of a pending invitation (a pending member's user id) withdraws the invitation. Another
// tenant's user, or a missing one, is NOT_FOUND.
func (s *Service) RemoveMember(ctx context.Context, userID uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleAdmin)
	if err != nil {
		return err
	}
	var withdrawn int64
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		withdrawn, err = tx.Q.InvitationDelete(ctx, dbsqlc.InvitationDeleteParams{TenantID: a.TenantID, ID: userID})
		return err
	})
	if err != nil || withdrawn > 0 {
		return err
	}
	return s.changeMember(ctx, a, userID, func(ctx context.Context, tx *db.Tx, a auth.Actor, m dbsqlc.Membership) error {
		if m.Role == string(auth.RoleOwner) {
			if err := lastOwner(ctx, tx, a.TenantID, "remove"); err != nil {
				return err
			}
		}
		if _, err := tx.Q.MembershipDelete(ctx, dbsqlc.MembershipDeleteParams{TenantID: a.TenantID, UserID: userID}); err != nil {
			return fmt.Errorf("delete membership: %w", err)
		}
		if err := tx.Q.RefreshTokenRevokeByUser(ctx, dbsqlc.RefreshTokenRevokeByUserParams{TenantID: a.TenantID, UserID: userID}); err != nil {
			return fmt.Errorf("revoke sessions: %w", err)
		}
		return tx.Q.APIKeyRevokeByUser(ctx, dbsqlc.APIKeyRevokeByUserParams{TenantID: a.TenantID, UserID: userID})
	})
}

// changeMember runs fn on the membership of userID in a's tenant, with the tenant's member
// changes serialised (its row locked), the caller's role read again under the lock (fn gets
// the caller with it) and an ADMIN kept off OWNERs; OnMemberChange follows the commit.
func (s *Service) changeMember(ctx context.Context, a auth.Actor, userID uuid.UUID, fn func(ctx context.Context, tx *db.Tx, a auth.Actor, m dbsqlc.Membership) error) error {
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantLockForMembers(ctx, a.TenantID); err != nil {
			return fmt.Errorf("lock tenant: %w", err)
		}
		// The caller's powers are their role now, under the lock: a change made a moment ago
		// (their own demotion among them) counts.
		self, err := tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: a.TenantID, UserID: a.UserID})
		if db.IsNoRows(err) {
			return apperr.New(apperr.Unauthenticated, "you are no longer a member of this tenant")
		}
		if err != nil {
			return fmt.Errorf("load own membership: %w", err)
		}
		if now := auth.Role(self.Role); a.APIKeyID == uuid.Nil || !now.AtLeast(a.Role) {
			a.Role = now
		}
		if !a.Role.AtLeast(auth.RoleAdmin) {
			return apperr.New(apperr.Forbidden, "this operation needs the ADMIN role or higher")
		}
		m, err := tx.Q.MembershipGet(ctx, dbsqlc.MembershipGetParams{TenantID: a.TenantID, UserID: userID})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("member")
		}
		if err != nil {
			return fmt.Errorf("load membership: %w", err)
		}
		if m.Role == string(auth.RoleOwner) && a.Role != auth.RoleOwner {
			return apperr.New(apperr.Forbidden, "only an OWNER can change or remove an OWNER")
		}
		if s.OnMemberChange != nil {
			tx.AfterCommit(func() { s.OnMemberChange(a.TenantID, userID) })
		}
		return fn(ctx, tx, a, m)
	})
}

// grantable refuses a role that is not one, or is above a's own.
func grantable(a auth.Actor, role auth.Role) error {
	if !role.Valid() {
		return apperr.Invalid("role", "must be one of OWNER, ADMIN, MEMBER, VIEWER")
	}
	if !a.Role.AtLeast(role) {
		return apperr.New(apperr.Forbidden, "cannot grant a role above your own (%s)", a.Role)
	}
	return nil
}

// lastOwner refuses to take the OWNER role from the tenant's only OWNER.
func lastOwner(ctx context.Context, tx *db.Tx, tenantID uuid.UUID, verb string) error {
	n, err := tx.Q.MembershipCountOwners(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("count owners: %w", err)
	}
	if n <= 1 {
		return apperr.New(apperr.Conflict, "cannot %s the tenant's last OWNER: make another member OWNER first", verb)
	}
	return nil
}

// Membership is one of a user's tenants, for a tenant switcher.
type Membership struct {
	TenantID   uuid.UUID
	TenantName string
	Role       auth.Role
	JoinedAt   time.Time
}

// Memberships returns the tenants the caller has joined (pending invitations aside), oldest
// first. An API key, which belongs to one tenant, sees that one only.
func (s *Service) Memberships(ctx context.Context) ([]Membership, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []Membership
	err = s.db.InSystemTx(ctx, "viewer.memberships: list the caller's own tenants", func(ctx context.Context, tx *db.Tx) error {
		rows, err := tx.Q.MembershipListTenantsOfUser(ctx, a.UserID)
		for _, r := range rows {
			if a.APIKeyID != uuid.Nil && r.TenantID != a.TenantID {
				continue
			}
			out = append(out, Membership{TenantID: r.TenantID, TenantName: r.TenantName, Role: auth.Role(r.Role), JoinedAt: r.CreatedAt})
		}
		return err
	})
	return out, err
}

func member(m dbsqlc.Membership, u dbsqlc.User) Member {
	return Member{User: u, Role: auth.Role(m.Role), JoinedAt: m.CreatedAt}
}
