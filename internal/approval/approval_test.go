package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/tool"
)

func TestArgsHashCanonical(t *testing.T) {
	t.Parallel()
	hash := func(name, args string) []byte {
		t.Helper()
		h, err := ArgsHash(name, json.RawMessage(args))
		require.NoError(t, err, args)
		require.Len(t, h, 32)
		return h
	}
	base := `{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true,"a":null}}}`
	same := []string{
		// key order, at every level
		`{"opts":{"deep":{"a":null,"b":true},"n":1,"tags":["x","y"],"mode":"append"},"content":"hi","path":"notes/a.md"}`,
		// whitespace
		"{ \"path\" : \"notes/a.md\",\n\t\"content\":\"hi\" , \"opts\" : { \"mode\":\"append\", \"tags\" : [ \"x\" , \"y\" ], \"n\" : 1, \"deep\":{\"b\" : true , \"a\":null} } }\n",
		// the same strings, escaped differently
		`{"path":"notes\/a.md","content":"\u0068i","opts":{"mode":"append","tags":["\u0078","y"],"n":1,"deep":{"b":true,"a":null}}}`,
	}
	want := hash("write_file", base)
	for _, s := range same {
		require.Equal(t, want, hash("write_file", s), "same call written differently: %s", s)
	}

	different := []string{
		`{"path":"notes/b.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true,"a":null}}}`,       // top-level string
		`{"path":"notes/a.md","content":"hi ","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true,"a":null}}}`,      // whitespace inside a string
		`{"path":"notes/a.md","content":"Hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true,"a":null}}}`,       // case
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["y","x"],"n":1,"deep":{"b":true,"a":null}}}`,       // array order
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":2,"deep":{"b":true,"a":null}}}`,       // number
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1.0,"deep":{"b":true,"a":null}}}`,     // number written otherwise
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":"1","deep":{"b":true,"a":null}}}`,     // type
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":false,"a":null}}}`,      // nested bool
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true}}}`,                // null vs missing
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true,"a":null,"c":0}}}`, // extra key
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y"],"n":1,"deep":{"b":true,"A":null}}}`,       // key case
		`{"path":"notes/a.md","content":"hi","opts":{"mode":"append","tags":["x","y","z"],"n":1,"deep":{"b":true,"a":null}}}`,
	}
	seen := map[string]string{string(want): base}
	for _, s := range different {
		h := string(hash("write_file", s))
		prev, dup := seen[h]
		require.False(t, dup, "%s hashes like %s", s, prev)
		seen[h] = s
	}
	require.NotEqual(t, want, hash("edit_file", base), "the tool name is part of the hash")
	// The name is length-prefixed: moving bytes between name and arguments changes the hash.
	require.NotEqual(t, hash("a", `"bc"`), hash("a\"", `"c"`))

	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `{"a":1}x`, "{\"a\":\"\xff\"}"} {
		_, err := ArgsHash("write_file", json.RawMessage(bad))
		require.Error(t, err, "%q", bad)
	}

	canon, err := Canonical(json.RawMessage(" { \"b\" : [ 1 , {\"d\":1,\"c\":2} ] , \"a\" : \"<&>\" } "))
	require.NoError(t, err)
	require.Equal(t, `{"a":"\u003c\u0026\u003e","b":[1,{"c":2,"d":1}]}`, string(canon))
}

func TestNeeds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name            string
		autoExecute     bool
		threshold       int
		known, readOnly bool
		risk            int
		want            bool
	}{
		{"unknown tool, autoExecute off", false, 50, false, false, UnknownToolRisk, true},
		{"unknown tool, autoExecute on, threshold 100", true, 100, false, false, 0, true},
		{"unknown tool claiming read-only", true, 100, false, true, 0, true},
		{"off: read-only call", false, 50, true, true, 25, false},
		{"off: read-only call, even above the threshold", false, 0, true, true, 90, false},
		{"off: write call with risk 0", false, 100, true, false, 0, true},
		{"off: write call", false, 50, true, false, 40, true},
		{"on: risk below threshold", true, 50, true, false, 40, false},
		{"on: risk equal to threshold", true, 50, true, false, 50, false},
		{"on: risk above threshold", true, 50, true, false, 51, true},
		{"on: read-only call above threshold", true, 20, true, true, 25, true},
		{"on: threshold 0, risk 0", true, 0, true, false, 0, false},
		{"on: threshold 100 never asks a known tool", true, 100, true, false, 100, false},
	} {
		require.Equal(t, c.want, Needs(c.autoExecute, c.threshold, c.known, c.readOnly, c.risk), c.name)
	}
}

func TestAssess(t *testing.T) {
	t.Parallel()
	reg := tool.NewRegistry()
	known, ro, risk := Assess(reg, "no_such_tool", json.RawMessage(`{}`))
	require.Equal(t, []any{false, false, UnknownToolRisk}, []any{known, ro, risk})
	known, ro, risk = Assess(reg, "read_file", json.RawMessage(`{"path":"a.md"}`))
	require.Equal(t, []any{true, true, 5}, []any{known, ro, risk})
	known, ro, risk = Assess(reg, "write_file", json.RawMessage(`{"path":".env","content":"x"}`))
	require.Equal(t, []any{true, false, 70}, []any{known, ro, risk})
}

// --- the service, against real Postgres and Redis ---

// fakeJobs records the jobs the run service enqueues.
type fakeJobs struct {
	mu     sync.Mutex
	next   int64
	insert []river.JobArgs
}

func (f *fakeJobs) InsertTx(_ context.Context, _ pgx.Tx, args river.JobArgs, _ *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.insert = append(f.insert, args)
	return &rivertype.JobInsertResult{Job: &rivertype.JobRow{ID: 1000 + f.next, Kind: args.Kind()}}, nil
}

func (f *fakeJobs) JobCancelTx(context.Context, pgx.Tx, int64) (*rivertype.JobRow, error) {
	return nil, river.ErrNotFound
}

func (f *fakeJobs) JobList(context.Context, *river.JobListParams) (*river.JobListResult, error) {
	return &river.JobListResult{}, nil
}

// inserted returns the run ids of the run jobs enqueued so far.
func (f *fakeJobs) inserted() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uuid.UUID
	for _, a := range f.insert {
		if ra, ok := a.(run.Args); ok {
			out = append(out, ra.RunID)
		}
	}
	return out
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bundle struct {
	db       *db.DB
	ownerURL string
	runs     *run.Service
	svc      *Service
	jobs     *fakeJobs
	clock    *clock
}

var prefixSeq atomic.Int64

func setup(t *testing.T) *bundle {
	t.Helper()
	d, ownerURL := dbtest.Open(t)
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	prefix := fmt.Sprintf("approvaltest%d-%d:", time.Now().UnixNano(), prefixSeq.Add(1))
	runs := run.NewService(d, events.NewPublisher(rdb, prefix, log), log)
	jobs := &fakeJobs{}
	runs.SetInserter(jobs)
	b := &bundle{db: d, ownerURL: ownerURL, runs: runs, jobs: jobs, clock: &clock{t: time.Now().UTC()}}
	b.svc = NewService(d, runs, 0, log)
	b.svc.SetClock(b.clock.Now)
	return b
}

// member is a user of a tenant with a role, and the context it calls with.
type member struct {
	tenantID, userID uuid.UUID
	ctx              context.Context
}

// newTenant makes a tenant with one user of role.
func (b *bundle) newTenant(t *testing.T, role auth.Role) member {
	t.Helper()
	m := member{tenantID: uuid.New(), userID: uuid.New()}
	err := b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: m.tenantID, Name: "t-" + m.tenantID.String()[:8]}); err != nil {
			return err
		}
		if _, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: m.userID, Email: m.userID.String() + "@example.com"}); err != nil {
			return err
		}
		_, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: m.tenantID, UserID: m.userID, Role: string(role)})
		return err
	})
	require.NoError(t, err)
	m.ctx = auth.WithActor(context.Background(), auth.Actor{UserID: m.userID, TenantID: m.tenantID, Role: role})
	return m
}

// as returns another user of m's tenant with role.
func (b *bundle) as(t *testing.T, m member, role auth.Role) member {
	t.Helper()
	o := member{tenantID: m.tenantID, userID: uuid.New()}
	err := b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: o.userID, Email: o.userID.String() + "@example.com"}); err != nil {
			return err
		}
		_, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: o.tenantID, UserID: o.userID, Role: string(role)})
		return err
	})
	require.NoError(t, err)
	o.ctx = auth.WithActor(context.Background(), auth.Actor{UserID: o.userID, TenantID: o.tenantID, Role: role})
	return o
}

// newRun makes a run of m's and takes it as a worker would: RUNNING, attempt 1, leased.
func (b *bundle) newRun(t *testing.T, m member) run.Lease {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	err := b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.RunInsert(ctx, dbsqlc.RunInsertParams{TenantID: m.tenantID, ID: id, UserID: m.userID, Kind: run.KindTask, Status: run.StatusQueued, MaxAttempts: 4})
		return err
	})
	require.NoError(t, err)
	l, err := b.runs.Acquire(context.Background(), m.tenantID, id, "test-worker", 1)
	require.NoError(t, err)
	require.Equal(t, run.StatusRunning, l.Run.Status)
	return l
}

// newCall stores a pending tool call of the leased run.
func (b *bundle) newCall(t *testing.T, l run.Lease, name, args string, risk int32) dbsqlc.ToolCall {
	t.Helper()
	var c dbsqlc.ToolCall
	err := b.runs.InFence(context.Background(), l, func(ctx context.Context, tx *db.Tx) error {
		var err error
		c, err = tx.Q.ToolCallInsert(ctx, dbsqlc.ToolCallInsertParams{
			TenantID: l.Run.TenantID, ID: uuid.Must(uuid.NewV7()), RunID: l.Run.ID, MessageID: uuid.New(), CallID: "call_" + uuid.NewString()[:8],
			Turn: 1, Name: name, Arguments: []byte(args), Status: "PENDING", Risk: risk,
		})
		return err
	})
	require.NoError(t, err)
	return c
}

// request asks, as the executor does, inside the lease's fenced transaction.
func (b *bundle) request(t *testing.T, l run.Lease, req Request) dbsqlc.Approval {
	t.Helper()
	var a dbsqlc.Approval
	err := b.runs.InFence(context.Background(), l, func(ctx context.Context, tx *db.Tx) error {
		var err error
		a, err = b.svc.Request(ctx, tx, l, req)
		return err
	})
	require.NoError(t, err)
	return a
}

// askCall makes a run with a write_file call and asks about it.
func (b *bundle) askCall(t *testing.T, m member) (run.Lease, dbsqlc.ToolCall, dbsqlc.Approval) {
	t.Helper()
	l := b.newRun(t, m)
	c := b.newCall(t, l, "write_file", `{"path": "notes/todo.md", "content": "buy milk"}`, 40)
	a := b.request(t, l, Request{Kind: KindToolCall, ToolCall: &c, Question: "Allow write_file?", Data: map[string]any{"risk": 40}})
	return l, c, a
}

func (b *bundle) getRun(t *testing.T, tenantID, runID uuid.UUID) dbsqlc.Run {
	t.Helper()
	var r dbsqlc.Run
	err := b.db.InTx(context.Background(), tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		r, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: runID})
		return err
	})
	require.NoError(t, err)
	return r
}

func (b *bundle) getApproval(t *testing.T, tenantID, id uuid.UUID) dbsqlc.Approval {
	t.Helper()
	var a dbsqlc.Approval
	err := b.db.InTx(context.Background(), tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		a, err = tx.Q.ApprovalGet(ctx, dbsqlc.ApprovalGetParams{TenantID: tenantID, ID: id})
		return err
	})
	require.NoError(t, err)
	return a
}

func (b *bundle) events(t *testing.T, tenantID, runID uuid.UUID) []events.Event {
	t.Helper()
	var out []events.Event
	err := b.db.InTx(context.Background(), tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		out, err = events.List(ctx, tx, tenantID, runID, 0, 1000)
		return err
	})
	require.NoError(t, err)
	return out
}

func types(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func eventData(t *testing.T, e events.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Data, &m))
	return m
}

func requireCode(t *testing.T, err error, code apperr.Code) *apperr.Error {
	t.Helper()
	require.Error(t, err)
	e, ok := apperr.As(err)
	require.True(t, ok, "an *apperr.Error, got %v", err)
	require.Equal(t, code, e.Code, e.Message)
	return e
}

func TestRequestSuspendsRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	l, c, a := b.askCall(t, m)

	require.Equal(t, StatusPending, a.Status)
	require.Equal(t, KindToolCall, a.Kind)
	require.Equal(t, uuid.NullUUID{UUID: c.ID, Valid: true}, a.ToolCallID)
	require.Equal(t, "write_file", *a.ToolName)
	want, err := ArgsHash(c.Name, c.Arguments)
	require.NoError(t, err)
	require.Equal(t, want, a.ArgsHash)
	require.Equal(t, "Allow write_file?", *a.Question)
	require.WithinDuration(t, b.clock.Now().Add(DefaultTTL), a.ExpiresAt, time.Millisecond)
	require.Nil(t, a.DecidedAt)

	r := b.getRun(t, m.tenantID, l.Run.ID)
	require.Equal(t, run.StatusAwaitingApproval, r.Status)
	require.Nil(t, r.LeaseOwner, "no worker holds a waiting run")
	require.Nil(t, r.LeaseExpiresAt)
	require.Nil(t, r.JobID, "the job ends")
	require.Empty(t, b.jobs.inserted(), "nothing is enqueued while the run waits")

	evs := b.events(t, m.tenantID, l.Run.ID)
	last := evs[len(evs)-1]
	require.Equal(t, events.ApprovalRequested, last.Type)
	d := eventData(t, last)
	require.Equal(t, a.ID.String(), d["approvalId"])
	require.Equal(t, KindToolCall, d["kind"])
	require.Equal(t, "Allow write_file?", d["question"])
	require.Equal(t, c.ID.String(), d["toolCallId"])
	require.Equal(t, "write_file", d["toolName"])
	require.Equal(t, map[string]any{"path": "notes/todo.md", "content": "buy milk"}, d["arguments"])
	require.EqualValues(t, 40, d["risk"])
	exp, err := time.Parse(time.RFC3339Nano, d["expiresAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, a.ExpiresAt, exp, time.Millisecond)

	// The executor finds it by its call.
	err = b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		got, found, err := b.svc.ForToolCall(ctx, tx, m.tenantID, c.ID)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, a.ID, got.ID)
		require.False(t, Permits(got, c), "a pending approval permits nothing")
		_, found, err = b.svc.ForToolCall(ctx, tx, m.tenantID, uuid.New())
		require.NoError(t, err)
		require.False(t, found)
		return nil
	})
	require.NoError(t, err)
}

func TestRequestWithStaleLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	l := b.newRun(t, m)
	c := b.newCall(t, l, "delete_file", `{"path":"a.md"}`, 70)
	stale := l
	stale.Attempt = l.Attempt - 1
	err := b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.svc.Request(ctx, tx, stale, Request{Kind: KindToolCall, ToolCall: &c, Question: "?"})
		return err
	})
	require.ErrorIs(t, err, run.ErrFenced)
	approvals, err := b.svc.ListByRun(m.ctx, l.Run.ID)
	require.NoError(t, err)
	require.Empty(t, approvals, "the approval rolled back with the refused suspension")
	require.Equal(t, run.StatusRunning, b.getRun(t, m.tenantID, l.Run.ID).Status)

	// Bad requests are refused before anything is written.
	err = b.runs.InFence(context.Background(), l, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.svc.Request(ctx, tx, l, Request{Kind: KindToolCall, Question: "no call"})
		return err
	})
	require.Error(t, err)
	err = b.runs.InFence(context.Background(), l, func(ctx context.Context, tx *db.Tx) error {
		_, err := b.svc.Request(ctx, tx, l, Request{Kind: "bogus", Question: "?"})
		return err
	})
	require.Error(t, err)
}

func TestResolveApprove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	l, c, a := b.askCall(t, m)
	b.clock.Add(time.Hour)

	got, err := b.svc.Resolve(m.ctx, a.ID, DecisionApprove, "go ahead")
	require.NoError(t, err)
	require.Equal(t, StatusApproved, got.Status)
	require.Equal(t, uuid.NullUUID{UUID: m.userID, Valid: true}, got.DecidedBy)
	require.Equal(t, "go ahead", *got.Note)
	require.NotNil(t, got.DecidedAt)
	require.WithinDuration(t, b.clock.Now(), *got.DecidedAt, time.Millisecond)
	require.Equal(t, got, b.getApproval(t, m.tenantID, a.ID))

	r := b.getRun(t, m.tenantID, l.Run.ID)
	require.Equal(t, run.StatusQueued, r.Status)
	require.Greater(t, r.Attempt, l.Attempt, "the old attempt is fenced out")
	require.Equal(t, []uuid.UUID{l.Run.ID}, b.jobs.inserted(), "one continuation job")
	require.NotNil(t, r.JobID)

	evs := b.events(t, m.tenantID, l.Run.ID)
	require.Equal(t, []string{events.ApprovalResolved, events.ExecutionResumed}, types(evs[len(evs)-2:]))
	d := eventData(t, evs[len(evs)-2])
	require.Equal(t, string(StatusApproved), d["status"])
	require.Equal(t, a.ID.String(), d["approvalId"])
	require.Equal(t, c.ID.String(), d["toolCallId"])
	require.Equal(t, "go ahead", d["note"])
	require.Equal(t, m.userID.String(), d["decidedBy"])

	// The approval permits exactly this call.
	require.True(t, Permits(got, c))
	other := c
	other.Arguments = []byte(`{"path":"notes/todo.md","content":"buy milk and rm -rf"}`)
	require.False(t, Permits(got, other), "other arguments")
	other = c
	other.Arguments = []byte(`{"content":"buy milk","path":"notes/todo.md"}`)
	require.True(t, Permits(got, other), "the same arguments in another key order")
	other = c
	other.Name = "delete_file"
	require.False(t, Permits(got, other), "another tool")
	other = c
	other.ID = uuid.New()
	require.False(t, Permits(got, other), "another call with the same arguments")
	late := got
	late.DecidedAt = &late.ExpiresAt
	require.False(t, Permits(late, c), "decided at the deadline")

	// A second decision, either way, is refused and changes nothing.
	for _, dec := range []string{DecisionApprove, DecisionReject} {
		_, err = b.svc.Resolve(m.ctx, a.ID, dec, "")
		e := requireCode(t, err, apperr.Conflict)
		require.Contains(t, e.Message, "already decided")
	}
	require.Equal(t, got, b.getApproval(t, m.tenantID, a.ID))
	require.Len(t, b.jobs.inserted(), 1, "no second continuation")
}

func TestResolveReject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	admin := b.as(t, m, auth.RoleAdmin)
	l, c, a := b.askCall(t, m)

	// An admin does not see another user's private question (nor decides it).
	_, err := b.svc.Resolve(admin.ctx, a.ID, DecisionReject, "")
	_ = requireCode(t, err, apperr.NotFound)
	got, err := b.svc.Resolve(m.ctx, a.ID, DecisionReject, "")
	require.NoError(t, err)
	require.Equal(t, StatusRejected, got.Status)
	require.Nil(t, got.Note)
	require.Equal(t, uuid.NullUUID{UUID: m.userID, Valid: true}, got.DecidedBy)
	require.False(t, Permits(got, c))

	r := b.getRun(t, m.tenantID, l.Run.ID)
	require.Equal(t, run.StatusQueued, r.Status, "the run goes on (the executor tells the model the call was rejected)")
	require.Equal(t, []uuid.UUID{l.Run.ID}, b.jobs.inserted())
	evs := b.events(t, m.tenantID, l.Run.ID)
	require.Equal(t, events.ApprovalResolved, evs[len(evs)-2].Type)
	require.Equal(t, string(StatusRejected), eventData(t, evs[len(evs)-2])["status"])

	_, err = b.svc.Resolve(m.ctx, a.ID, DecisionApprove, "")
	_ = requireCode(t, err, apperr.Conflict)
	require.Equal(t, StatusRejected, b.getApproval(t, m.tenantID, a.ID).Status, "a rejection cannot be turned into an approval")
}

func TestResolveExpired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	l, c, a := b.askCall(t, m)
	b.clock.Add(DefaultTTL)

	_, err := b.svc.Resolve(m.ctx, a.ID, DecisionApprove, "too late")
	e := requireCode(t, err, apperr.Conflict)
	require.Contains(t, e.Message, "expired")

	got := b.getApproval(t, m.tenantID, a.ID)
	require.Equal(t, StatusExpired, got.Status)
	require.False(t, got.DecidedBy.Valid, "nobody decided")
	require.Nil(t, got.Note, "the late note is not kept")
	require.False(t, Permits(got, c), "an expired approval runs nothing")

	r := b.getRun(t, m.tenantID, l.Run.ID)
	require.Equal(t, run.StatusQueued, r.Status, "the run moves on")
	require.Equal(t, []uuid.UUID{l.Run.ID}, b.jobs.inserted())
	evs := b.events(t, m.tenantID, l.Run.ID)
	require.Equal(t, []string{events.ApprovalResolved, events.ExecutionResumed}, types(evs[len(evs)-2:]))
	require.Equal(t, string(StatusExpired), eventData(t, evs[len(evs)-2])["status"])

	// Asking again says expired again; the sweep finds nothing left.
	_, err = b.svc.Resolve(m.ctx, a.ID, DecisionReject, "")
	e = requireCode(t, err, apperr.Conflict)
	require.Contains(t, e.Message, "expired")
	n, err := b.svc.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, b.jobs.inserted(), 1)
}

func TestResolveAfterRunEnded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	l, _, a := b.askCall(t, m)
	_, err := b.runs.Cancel(m.ctx, l.Run.ID)
	require.NoError(t, err)
	require.Equal(t, run.StatusCancelled, b.getRun(t, m.tenantID, l.Run.ID).Status)

	_, err = b.svc.Resolve(m.ctx, a.ID, DecisionApprove, "")
	e := requireCode(t, err, apperr.Conflict)
	require.Contains(t, e.Message, "no longer waits")
	require.Equal(t, StatusPending, b.getApproval(t, m.tenantID, a.ID).Status)
	require.Equal(t, run.StatusCancelled, b.getRun(t, m.tenantID, l.Run.ID).Status)
	require.Empty(t, b.jobs.inserted())
}

func TestResolveChecksCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	_, _, a := b.askCall(t, m)

	_, err := b.svc.Resolve(context.Background(), a.ID, DecisionApprove, "")
	_ = requireCode(t, err, apperr.Unauthenticated)
	viewer := b.as(t, m, auth.RoleViewer)
	_, err = b.svc.Resolve(viewer.ctx, a.ID, DecisionApprove, "")
	_ = requireCode(t, err, apperr.Forbidden)
	_, err = b.svc.Resolve(m.ctx, a.ID, "MAYBE", "")
	_ = requireCode(t, err, apperr.BadUserInput)
	long := make([]rune, MaxNoteLength+1)
	for i := range long {
		long[i] = 'é'
	}
	_, err = b.svc.Resolve(m.ctx, a.ID, DecisionApprove, string(long))
	_ = requireCode(t, err, apperr.BadUserInput)
	_, err = b.svc.Resolve(m.ctx, uuid.New(), DecisionApprove, "")
	_ = requireCode(t, err, apperr.NotFound)

	// Its user reads it; a viewer of the tenant does not see another user's private question.
	got, err := b.svc.Get(m.ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, StatusPending, got.Status)
	_, err = b.svc.Get(viewer.ctx, a.ID)
	_ = requireCode(t, err, apperr.NotFound)
}

func TestOtherTenantSeesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	other := b.newTenant(t, auth.RoleOwner)
	l, _, a := b.askCall(t, m)

	_, err := b.svc.Resolve(other.ctx, a.ID, DecisionApprove, "")
	_ = requireCode(t, err, apperr.NotFound)
	_, err = b.svc.Get(other.ctx, a.ID)
	_ = requireCode(t, err, apperr.NotFound)
	list, err := b.svc.ListByRun(other.ctx, l.Run.ID)
	require.NoError(t, err)
	require.Empty(t, list)

	require.Equal(t, StatusPending, b.getApproval(t, m.tenantID, a.ID).Status)
	require.Equal(t, run.StatusAwaitingApproval, b.getRun(t, m.tenantID, l.Run.ID).Status)
	require.Empty(t, b.jobs.inserted())

	list, err = b.svc.ListByRun(m.ctx, l.Run.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestLatestContinue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	l := b.newRun(t, m)
	a := b.request(t, l, Request{Kind: KindContinue, Question: "The run has taken 20 turns. Continue?", Data: map[string]any{"turns": 20}})
	require.False(t, a.ToolCallID.Valid)
	require.Nil(t, a.ToolName)
	require.Nil(t, a.ArgsHash)
	require.JSONEq(t, `{"turns":20}`, string(a.Data))
	evs := b.events(t, m.tenantID, l.Run.ID)
	d := eventData(t, evs[len(evs)-1])
	require.EqualValues(t, 20, d["turns"])
	require.Equal(t, KindContinue, d["kind"])

	_, err := b.svc.Resolve(m.ctx, a.ID, DecisionApprove, "")
	require.NoError(t, err)
	err = b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		got, found, err := b.svc.Latest(ctx, tx, m.tenantID, l.Run.ID, KindContinue)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, a.ID, got.ID)
		require.Equal(t, StatusApproved, got.Status)
		_, found, err = b.svc.Latest(ctx, tx, m.tenantID, l.Run.ID, KindEscalation)
		require.NoError(t, err)
		require.False(t, found)
		return nil
	})
	require.NoError(t, err)

	// The continuation asks again later: Latest is the newest.
	l2, err := b.runs.Acquire(context.Background(), m.tenantID, l.Run.ID, "test-worker", *b.getRun(t, m.tenantID, l.Run.ID).JobID)
	require.NoError(t, err)
	b.clock.Add(time.Minute)
	long := strings.Repeat("é", MaxQuestionLength+5)
	a2 := b.request(t, l2, Request{Kind: KindContinue, Question: long, Data: map[string]any{"turns": 40}})
	require.Len(t, []rune(*a2.Question), MaxQuestionLength, "a long question is shortened, not refused")
	err = b.db.InTx(context.Background(), m.tenantID, func(ctx context.Context, tx *db.Tx) error {
		got, found, err := b.svc.Latest(ctx, tx, m.tenantID, l.Run.ID, KindContinue)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, a2.ID, got.ID)
		require.Equal(t, StatusPending, got.Status)
		return nil
	})
	require.NoError(t, err)
}

func TestExpireDueAcrossTenants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tA := b.newTenant(t, auth.RoleMember)
	tB := b.newTenant(t, auth.RoleMember)

	lA1, _, dueA := b.askCall(t, tA)
	lB, _, dueB := b.askCall(t, tB)
	lEnded, _, dueEnded := b.askCall(t, tA)
	lDecided, _, decided := b.askCall(t, tB)
	_, err := b.svc.Resolve(tB.ctx, decided.ID, DecisionReject, "")
	require.NoError(t, err)
	_, err = b.runs.Cancel(tA.ctx, lEnded.Run.ID)
	require.NoError(t, err)
	b.clock.Add(DefaultTTL / 2)
	lA2, _, fresh := b.askCall(t, tA)
	b.clock.Add(DefaultTTL/2 + time.Second)

	n, err := b.svc.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n, "the two waiting ones and the one of the cancelled run")

	require.Equal(t, StatusExpired, b.getApproval(t, tA.tenantID, dueA.ID).Status)
	require.Equal(t, StatusExpired, b.getApproval(t, tB.tenantID, dueB.ID).Status)
	require.Equal(t, StatusExpired, b.getApproval(t, tA.tenantID, dueEnded.ID).Status)
	require.Equal(t, StatusRejected, b.getApproval(t, tB.tenantID, decided.ID).Status, "a decided approval stays decided")
	require.Equal(t, StatusPending, b.getApproval(t, tA.tenantID, fresh.ID).Status, "not due yet")

	for _, c := range []struct {
		m member
		l run.Lease
	}{{tA, lA1}, {tB, lB}} {
		require.Equal(t, run.StatusQueued, b.getRun(t, c.m.tenantID, c.l.Run.ID).Status)
		evs := b.events(t, c.m.tenantID, c.l.Run.ID)
		require.Equal(t, []string{events.ApprovalResolved, events.ExecutionResumed}, types(evs[len(evs)-2:]))
		require.Equal(t, string(StatusExpired), eventData(t, evs[len(evs)-2])["status"])
	}
	require.Equal(t, run.StatusAwaitingApproval, b.getRun(t, tA.tenantID, lA2.Run.ID).Status)
	require.Equal(t, run.StatusCancelled, b.getRun(t, tA.tenantID, lEnded.Run.ID).Status)
	evs := b.events(t, tA.tenantID, lEnded.Run.ID)
	require.True(t, events.Terminal(evs[len(evs)-1].Type), "nothing follows the cancelled run's terminal event")
	require.ElementsMatch(t, []uuid.UUID{lDecided.Run.ID, lA1.Run.ID, lB.Run.ID}, b.jobs.inserted())

	n, err = b.svc.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "nothing left")
	b.clock.Add(DefaultTTL)
	n, err = b.svc.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the fresh one, once due")
}

// The periodic job works the sweep on the maintenance queue.
func TestExpireWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.newTenant(t, auth.RoleMember)
	_, _, a := b.askCall(t, m)
	b.clock.Add(DefaultTTL)

	ctx := context.Background()
	pool, err := pgxpool.New(ctx, b.ownerURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })

	w := rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{}, NewExpireWorker(b.svc))
	res, err := w.Work(ctx, t, tx, ExpireArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, "maintenance", res.Job.Queue)
	require.Equal(t, "approval_expire", res.Job.Kind)
	require.Equal(t, StatusExpired, b.getApproval(t, m.tenantID, a.ID).Status)
	require.NotNil(t, ExpirePeriodicJob())
}

func TestNewServiceTTL(t *testing.T) {
	t.Parallel()
	require.Equal(t, DefaultTTL, NewService(nil, nil, 0, slog.New(slog.DiscardHandler)).TTL())
	require.Equal(t, time.Hour, NewService(nil, nil, time.Hour, slog.New(slog.DiscardHandler)).TTL())
}
