package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
)

// StateTTL is how long a process trusts what it read of a session (its user's role, whether it
// is still open) without a change message: the bound on a stale role when a message is lost.
const StateTTL = 2 * time.Second

// maxStates bounds the sessions whose state is remembered (a cache: it starts afresh when full).
const maxStates = 10_000

var errSessionEnded = apperr.New(apperr.Unauthenticated, "this session has ended (logged out, password changed, or no longer a member); log in again")

// sessionKey names one session of a user in a tenant.
type sessionKey struct{ tenant, user, session uuid.UUID }

// sessionState is what was read of a session: open, with its user's role, at a time.
type sessionState struct {
	role Role
	open bool
	at   time.Time
	// reread marks a state a change made stale: the next request reads it again, and a read
	// that began before the change (at) does not store what it read.
	reread bool
}

// userKey names a user in a tenant; a nil tenant stands for every tenant of the user.
type userKey struct{ tenant, user uuid.UUID }

// watch is one open stream (a WebSocket, an SSE response) of a credential, ended when the
// credential stops authenticating or its role drops.
type watch struct {
	actor  Actor
	bearer string
	end    func()
}

// current keeps the state of sessions and the open streams of credentials, per process.
type current struct {
	mu      sync.Mutex
	states  map[sessionKey]sessionState
	watches map[userKey]map[*watch]struct{}
}

func newCurrent() *current {
	return &current{states: map[sessionKey]sessionState{}, watches: map[userKey]map[*watch]struct{}{}}
}

// currentActor is a's actor now: an access token's role is its user's current role in the
// tenant (read at most StateTTL ago, or since the last change message), and a session that was
// logged out, revoked, or whose user left the tenant no longer authenticates.
func (s *Service) currentActor(ctx context.Context, a Actor) (Actor, error) {
	if a.SessionID == uuid.Nil {
		return Actor{}, errSessionEnded
	}
	key := sessionKey{a.TenantID, a.UserID, a.SessionID}
	s.cur.mu.Lock()
	st, hit := s.cur.states[key]
	s.cur.mu.Unlock()
	if !hit || st.reread || time.Since(st.at) >= StateTTL {
		at := time.Now()
		var row dbsqlc.SessionStateRow
		err := s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			row, err = tx.Q.SessionState(ctx, dbsqlc.SessionStateParams{TenantID: a.TenantID, UserID: a.UserID, FamilyID: a.SessionID})
			return err
		})
		switch {
		case db.IsNoRows(err):
			st = sessionState{at: at}
		case err != nil:
			return Actor{}, fmt.Errorf("read session state: %w", err)
		default:
			st = sessionState{role: Role(row.Role), open: row.Open, at: at}
		}
		s.cur.mu.Lock()
		if len(s.cur.states) >= maxStates {
			s.cur.states = map[sessionKey]sessionState{}
		}
		// A change noted while the state was read (its time is later) keeps the entry out.
		if old, ok := s.cur.states[key]; !ok || !old.at.After(at) {
			s.cur.states[key] = st
		}
		s.cur.mu.Unlock()
	}
	if !st.open || !st.role.Valid() {
		return Actor{}, errSessionEnded
	}
	a.Role = st.role
	return a, nil
}

// Watch ties an open stream of the credential bearer (whose actor is a) to the credential:
// end runs, at most once, as soon as a change of the user's membership, sessions or keys in
// the tenant leaves the credential unable to authenticate or with a lower role. stop forgets
// the stream.
func (s *Service) Watch(a Actor, bearer string, end func()) (stop func()) {
	w := &watch{actor: a, bearer: bearer, end: sync.OnceFunc(end)}
	k := userKey{a.TenantID, a.UserID}
	s.cur.mu.Lock()
	set := s.cur.watches[k]
	if set == nil {
		set = map[*watch]struct{}{}
		s.cur.watches[k] = set
	}
	set[w] = struct{}{}
	s.cur.mu.Unlock()
	return func() {
		s.cur.mu.Lock()
		defer s.cur.mu.Unlock()
		if set := s.cur.watches[k]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(s.cur.watches, k)
			}
		}
	}
}

// Changed notes that something about userID in tenantID changed (role, membership, sessions,
// API keys; tenantID nil: in every tenant): this process forgets what it read of their sessions
// and re-checks their open streams at once, and other processes are told through Redis.
func (s *Service) Changed(ctx context.Context, tenantID, userID uuid.UUID) {
	s.changedLocally(tenantID, userID)
	if bus := s.bus.Load(); bus != nil {
		bus.publish(ctx, tenantID, userID)
	}
}

// changedLocally forgets the user's session states and re-checks their open streams.
func (s *Service) changedLocally(tenantID, userID uuid.UUID) {
	now := time.Now()
	var ws []*watch
	s.cur.mu.Lock()
	for k := range s.cur.states {
		if k.user == userID && (tenantID == uuid.Nil || k.tenant == tenantID) {
			s.cur.states[k] = sessionState{at: now, reread: true}
		}
	}
	for k, set := range s.cur.watches {
		if k.user == userID && (tenantID == uuid.Nil || k.tenant == tenantID) {
			for w := range set {
				ws = append(ws, w)
			}
		}
	}
	s.cur.mu.Unlock()
	s.recheck(ws)
}

// changedEverywhere forgets every state and re-checks every stream (the change messages may
// have been lost: Redis reconnected).
func (s *Service) changedEverywhere() {
	var ws []*watch
	s.cur.mu.Lock()
	s.cur.states = map[sessionKey]sessionState{}
	for _, set := range s.cur.watches {
		for w := range set {
			ws = append(ws, w)
		}
	}
	s.cur.mu.Unlock()
	s.recheck(ws)
}

// recheck authenticates each stream's credential again and ends the streams it no longer
// authenticates, or authenticates with a lower role. A failure to check (Postgres down) keeps
// the stream: the next change, or the credential's expiry, decides.
func (s *Service) recheck(ws []*watch) {
	for _, w := range ws {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a, _, err := s.Authenticate(ctx, w.bearer)
			switch {
			case IsUnauthenticated(err):
				w.end()
			case err != nil:
				s.log.WarnContext(ctx, "re-check a stream's credential", slog.Any("error", err))
			case a.Role.rank() < w.actor.Role.rank():
				w.end()
			}
		}()
	}
}

// changeBus carries change messages between processes over one Redis channel.
type changeBus struct {
	rdb     redis.UniversalClient
	channel string
	origin  string
	log     *slog.Logger
}

type changeMsg struct {
	Origin string    `json:"o"`
	Tenant uuid.UUID `json:"t"`
	User   uuid.UUID `json:"u"`
}

func (b *changeBus) publish(ctx context.Context, tenantID, userID uuid.UUID) {
	msg, _ := json.Marshal(changeMsg{Origin: b.origin, Tenant: tenantID, User: userID})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := b.rdb.Publish(ctx, b.channel, msg).Err(); err != nil {
		// Other processes still drop the state within StateTTL; their open streams wait for
		// the next change or the Redis reconnect (which re-checks them all).
		b.log.WarnContext(ctx, "publish a credential change", slog.Any("error", err))
	}
}

// ListenForChanges tells this process of the credential changes other processes make, through
// Redis (channel <prefix>agentry:auth:changes), and publishes this process's own there, until
// ctx ends. It returns once the subscription is confirmed. Each (re)connection of the
// subscription after the first re-checks everything, as messages may have been lost.
func (s *Service) ListenForChanges(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	bus := &changeBus{rdb: rdb, channel: prefix + "agentry:auth:changes", origin: strings.ReplaceAll(uuid.NewString(), "-", ""), log: s.log}
	err := events.Listen(ctx, rdb, bus.channel, func(payload string) {
		var c changeMsg
		if json.Unmarshal([]byte(payload), &c) != nil || c.Origin == bus.origin {
			return
		}
		s.changedLocally(c.Tenant, c.User)
	}, s.changedEverywhere)
	if err != nil {
		return fmt.Errorf("subscribe to credential changes: %w", err)
	}
	s.bus.Store(bus)
	return nil
}
