package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/metrics"
)

// WebSocket close codes beyond those gqlgen's transport sends itself.
const (
	// closeTooMany closes a socket whose user already holds as many as they may
	// (graphql-transport-ws's 4429, "too many", refused before the connection is acknowledged).
	closeTooMany = 4429
	// closeDuplicateID closes a socket that starts an operation under the id of one still in
	// flight, as graphql-transport-ws requires ("4409: Subscriber for <id> already exists").
	closeDuplicateID = 4409
	// maxCloseReason is the longest reason a close frame carries.
	maxCloseReason = 123
)

// sockets are the WebSockets this handler serves. It counts them per user (admit), counts each
// socket's subscriptions (capSubscriptions) and enforces graphql-transport-ws's unique operation
// ids, all on gqlgen's own transport: a socket is a request whose context carries its socket.
//
// The caps are per process: what a socket costs (memory, goroutines, a file descriptor, a share
// of the process's Redis fan-out) is the process's, and a count per process is what bounds
// it. A count across processes would need a lease per socket kept alive in Redis and reclaimed
// when a process dies, and would protect no process better.
type sockets struct {
	maxSubs, maxPerUser int
	// metrics counts running subscriptions (nil: not counted).
	metrics *metrics.Metrics

	mu      sync.Mutex
	perUser map[uuid.UUID]int
}

func newSockets(maxSubs, maxPerUser int) *sockets {
	return &sockets{maxSubs: maxSubs, maxPerUser: maxPerUser, perUser: map[uuid.UUID]int{}}
}

// socket is one WebSocket's state.
type socket struct {
	mu      sync.Mutex
	user    uuid.UUID           // set once admitted: counted against the user's cap until close
	subs    int                 // subscriptions running
	ids     map[string]struct{} // graphql-transport-ws operation ids in flight
	release []func()            // run when the socket ends
}

type socketKey struct{}

func socketFrom(ctx context.Context) *socket {
	s, _ := ctx.Value(socketKey{}).(*socket)
	return s
}

// onClose runs f when the socket in ctx ends (a context without one is no socket's: its own
// end is left to release what f would).
func onClose(ctx context.Context, f func()) {
	s := socketFrom(ctx)
	if s == nil {
		return
	}
	s.mu.Lock()
	s.release = append(s.release, f)
	s.mu.Unlock()
}

// serve hands every request to next; a WebSocket upgrade gets a socket in its context, whose
// context ends when closeAll does (graceful shutdown: http.Server's Shutdown does not track
// hijacked connections) or when the socket ends, whichever is first. Nothing of the socket
// stays referenced once it ended.
func (ss *sockets) serve(closeAll context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			next.ServeHTTP(w, r)
			return
		}
		s := &socket{ids: map[string]struct{}{}}
		ctx, cancel := context.WithCancel(context.WithValue(r.Context(), socketKey{}, s))
		defer cancel()
		if closeAll != nil {
			stop := context.AfterFunc(closeAll, cancel)
			defer stop()
		}
		defer ss.close(s)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admit counts the socket in ctx against a's user's cap, or refuses it when the user already
// holds as many as they may.
func (ss *sockets) admit(ctx context.Context, a auth.Actor) error {
	s := socketFrom(ctx)
	if s == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.perUser[a.UserID] >= ss.maxPerUser {
		return wsError(fmt.Sprintf("RATE_LIMITED: this user already holds %d open WebSockets, the most one may; close one first", ss.maxPerUser))
	}
	ss.perUser[a.UserID]++
	s.mu.Lock()
	s.user = a.UserID
	s.mu.Unlock()
	return nil
}

// close releases what the socket held.
func (ss *sockets) close(s *socket) {
	s.mu.Lock()
	user, release := s.user, s.release
	s.user, s.release = uuid.Nil, nil
	s.mu.Unlock()
	for _, f := range release {
		f()
	}
	if user == uuid.Nil {
		return
	}
	ss.mu.Lock()
	if ss.perUser[user]--; ss.perUser[user] <= 0 {
		delete(ss.perUser, user)
	}
	ss.mu.Unlock()
}

// capSubscriptions refuses a subscription on a socket that already runs as many as it may: the
// operation ends with an error message (RATE_LIMITED) and the socket stays open.
func (ss *sockets) capSubscriptions(present graphql.ErrorPresenterFunc) graphql.OperationMiddleware {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		s := socketFrom(ctx)
		if s == nil || graphql.GetOperationContext(ctx).Operation.Operation != ast.Subscription {
			return next(ctx)
		}
		s.mu.Lock()
		full := s.subs >= ss.maxSubs
		if !full {
			s.subs++
		}
		s.mu.Unlock()
		if !full {
			ss.metrics.SubscriptionStarted()
		}
		if full {
			err := apperr.New(apperr.RateLimited, "this WebSocket already runs %d subscriptions, the most one may; complete one first, or open another socket", ss.maxSubs)
			transport.AddSubscriptionError(ctx, present(ctx, err))
			return func(context.Context) *graphql.Response { return nil }
		}
		var once sync.Once
		done := func() {
			once.Do(func() {
				ss.metrics.SubscriptionEnded()
				s.mu.Lock()
				s.subs--
				s.mu.Unlock()
			})
		}
		h := next(ctx)
		return func(ctx context.Context) *graphql.Response {
			ended := true
			defer func() {
				if ended { // the stream ended, or the handler panicked
					done()
				}
			}()
			resp := h(ctx)
			ended = resp == nil
			return resp
		}
	}
}

// uniqueIDs accepts sockets whose connections close with 4409 when a client starts an
// operation under the id of one still in flight: gqlgen's transport would run both under one
// id, and the first could no longer be completed.
type uniqueIDs struct {
	transport.WebsocketImplementation
}

func (u uniqueIDs) Accept(w http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	c, err := u.WebsocketImplementation.Accept(w, r, o)
	if err != nil || c.Subprotocol() != "graphql-transport-ws" {
		return c, err
	}
	s := socketFrom(r.Context())
	if s == nil {
		return c, nil
	}
	return &idConn{WebsocketConn: c, s: s}, nil
}

// idConn is a graphql-transport-ws connection that tracks its operation ids: an id is in flight
// from the client's subscribe until the server's complete or error for it, or the client's
// complete.
type idConn struct {
	transport.WebsocketConn
	s *socket
	// closing is set once a duplicate id closes the socket: nothing more is written before
	// the close frame (the operations it tears down would otherwise send their complete).
	closing atomic.Bool
}

// The optional interfaces of gqlgen's own connection pass through.
var (
	_ transport.WebsocketReadLimiter   = (*idConn)(nil)
	_ transport.WebsocketReadDeadliner = (*idConn)(nil)
)

func (c *idConn) SetReadLimit(limit int64) {
	if l, ok := c.WebsocketConn.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

func (c *idConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.WebsocketConn.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

// NextReader reads the client's next message, noting the operation id it starts or completes.
// A subscribe under an id in flight closes the socket with 4409.
func (c *idConn) NextReader() (int, io.Reader, error) {
	typ, r, err := c.WebsocketConn.NextReader()
	if err != nil {
		return typ, r, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return typ, nil, err
	}
	var msg struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &msg) == nil && msg.ID != "" {
		c.s.mu.Lock()
		_, inFlight := c.s.ids[msg.ID]
		switch msg.Type {
		case "subscribe":
			c.s.ids[msg.ID] = struct{}{}
		case "complete":
			delete(c.s.ids, msg.ID)
		}
		c.s.mu.Unlock()
		if msg.Type == "subscribe" && inFlight {
			c.closing.Store(true)
			reason := "Subscriber for " + msg.ID + " already exists"
			if len(reason) > maxCloseReason { // a close frame's reason has room for 123 bytes
				reason = "Subscriber for this id already exists"
			}
			_ = c.WebsocketConn.WriteClose(closeDuplicateID, reason)
			return typ, nil, transport.ErrWebsocketClosed
		}
	}
	return typ, bytes.NewReader(data), nil
}

// WriteJSON writes a server message; a complete or error ends its operation's id.
func (c *idConn) WriteJSON(v any) error {
	if c.closing.Load() {
		return transport.ErrWebsocketClosed
	}
	if id, ok := endedID(v); ok {
		c.s.mu.Lock()
		delete(c.s.ids, id)
		c.s.mu.Unlock()
	}
	return c.WebsocketConn.WriteJSON(v)
}

// endedID returns the operation id a server message ends (its type complete or error), read
// from the exported ID and Type fields of gqlgen's graphql-transport-ws message.
func endedID(v any) (string, bool) {
	rv := reflect.Indirect(reflect.ValueOf(v))
	if rv.Kind() != reflect.Struct {
		return "", false
	}
	id, typ := rv.FieldByName("ID"), rv.FieldByName("Type")
	if !id.IsValid() || !typ.IsValid() || id.Kind() != reflect.String || typ.Kind() != reflect.String {
		return "", false
	}
	switch typ.String() {
	case "complete", "error":
		return id.String(), true
	}
	return "", false
}
