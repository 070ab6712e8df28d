package task_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/task"
)

const testModel = "anthropic:claude-sonnet-4-5"

type defaultModel string

func (m defaultModel) Default() string { return string(m) }

// tenant is one tenant with a member, a viewer and two projects (the first the default).
type tenant struct {
	id, userID        uuid.UUID
	member, viewer    context.Context
	project, project2 uuid.UUID
}

// bundle is what a task test works with: a fresh database, the task and run services (jobs are
// inserted with an insert-only River client, nothing works them) and two tenants.
type bundle struct {
	d      *db.DB
	driver *riverpgxv5.Driver
	runs   *run.Service
	svc    *task.Service
	a, b   tenant
}

var prefixSeq atomic.Int64

func setup(t *testing.T) *bundle {
	t.Helper()
	d, _ := dbtest.Open(t)
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	prefix := fmt.Sprintf("tasktest%d-%d:", time.Now().UnixNano(), prefixSeq.Add(1))
	runs := run.NewService(d, events.NewPublisher(rdb, prefix, log), log)
	driver := riverpgxv5.New(d.Pool)
	client, err := river.NewClient(driver, &river.Config{Logger: log})
	require.NoError(t, err)
	runs.SetInserter(client)
	runs.OnFinish(run.KindTask, task.Hooks{}.Finished)
	b := &bundle{d: d, driver: driver, runs: runs, svc: task.NewService(d, runs, defaultModel(testModel), log)}
	b.a, b.b = b.newTenant(t), b.newTenant(t)
	return b
}

func (b *bundle) newTenant(t *testing.T) tenant {
	t.Helper()
	ctx := context.Background()
	tn := tenant{id: uuid.Must(uuid.NewV7()), userID: uuid.Must(uuid.NewV7())}
	viewerID := uuid.Must(uuid.NewV7())
	require.NoError(t, b.d.InTx(ctx, tn.id, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tn.id, Name: "tenant " + tn.id.String()[:8]}); err != nil {
			return err
		}
		for _, u := range []struct {
			id   uuid.UUID
			role auth.Role
		}{{tn.userID, auth.RoleMember}, {viewerID, auth.RoleViewer}} {
			if _, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: u.id, Email: u.id.String() + "@example.com"}); err != nil {
				return err
			}
			if _, err := tx.Q.MembershipInsert(ctx, dbsqlc.MembershipInsertParams{TenantID: tn.id, UserID: u.id, Role: string(u.role)}); err != nil {
				return err
			}
		}
		for i, p := range []*uuid.UUID{&tn.project, &tn.project2} {
			row, err := tx.Q.ProjectInsert(ctx, dbsqlc.ProjectInsertParams{TenantID: tn.id, ID: uuid.Must(uuid.NewV7()), Name: fmt.Sprintf("project %d", i), IsDefault: i == 0})
			if err != nil {
				return err
			}
			*p = row.ID
		}
		return nil
	}))
	tn.member = auth.WithActor(ctx, auth.Actor{UserID: tn.userID, TenantID: tn.id, Role: auth.RoleMember})
	tn.viewer = auth.WithActor(ctx, auth.Actor{UserID: viewerID, TenantID: tn.id, Role: auth.RoleViewer})
	return tn
}

func (b *bundle) create(t *testing.T, ctx context.Context, in task.NewTask) dbsqlc.Task {
	t.Helper()
	out, err := b.svc.Create(ctx, in)
	require.NoError(t, err)
	return out
}

// in runs fn in a transaction of tn's tenant.
func (b *bundle) in(t *testing.T, tn tenant, fn func(ctx context.Context, tx *db.Tx) error) {
	t.Helper()
	require.NoError(t, b.d.InTx(context.Background(), tn.id, fn))
}

func (b *bundle) status(t *testing.T, tn tenant, id uuid.UUID) task.Status {
	t.Helper()
	got, err := b.svc.Get(tn.viewer, id)
	require.NoError(t, err)
	return got.Status
}

func requireCode(t *testing.T, err error, code apperr.Code, field string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "%v", err)
	if field != "" {
		e, _ := apperr.As(err)
		require.Equal(t, field, e.Fields["field"], "%v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestTaskCreateDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.create(t, b.a.member, task.NewTask{Title: "  Fix the login page  "})
	require.Equal(t, "Fix the login page", got.Title)
	require.Equal(t, "fix-the-login-page", got.Slug)
	require.Equal(t, task.StatusOpen, got.Status)
	require.Equal(t, "MEDIUM", got.Priority)
	require.Equal(t, "TASK", got.Type)
	require.Equal(t, "STANDARD", got.Complexity)
	require.Equal(t, "user", got.Source)
	require.Equal(t, b.a.project, got.ProjectID, "the default project")
	require.Equal(t, b.a.userID, got.CreatedBy)
	require.Nil(t, got.Description)
	require.Nil(t, got.AcceptanceCriteria)
	require.Empty(t, got.Tags)

	full := b.create(t, b.a.member, task.NewTask{
		ProjectID: b.a.project2, Title: "Add dark mode", Description: "Users want it.", AcceptanceCriteria: "A toggle exists.",
		Tags: []string{" ui ", "theme", "ui"}, Priority: "HIGH", Type: "FEATURE", Complexity: "COMPLEX", Source: "architect",
	})
	require.Equal(t, b.a.project2, full.ProjectID)
	require.Equal(t, []string{"ui", "theme"}, full.Tags, "trimmed, repeats dropped")
	require.Equal(t, "Users want it.", *full.Description)
	require.Equal(t, "A toggle exists.", *full.AcceptanceCriteria)
	require.Equal(t, []string{"HIGH", "FEATURE", "COMPLEX", "architect"}, []string{full.Priority, full.Type, full.Complexity, full.Source})

	// Reads: a viewer may; another tenant may not (NOT_FOUND, as if missing).
	seen, err := b.svc.Get(b.a.viewer, full.ID)
	require.NoError(t, err)
	require.Equal(t, full.ID, seen.ID)
	_, err = b.svc.Get(b.b.member, full.ID)
	requireCode(t, err, apperr.NotFound, "")
	_, err = b.svc.Get(b.a.member, uuid.Must(uuid.NewV7()))
	requireCode(t, err, apperr.NotFound, "")

	// Another tenant's project cannot hold the caller's task.
	_, err = b.svc.Create(b.b.member, task.NewTask{ProjectID: b.a.project, Title: "sneaky"})
	requireCode(t, err, apperr.NotFound, "")
	// A viewer cannot create.
	_, err = b.svc.Create(b.a.viewer, task.NewTask{Title: "nope"})
	requireCode(t, err, apperr.Forbidden, "")
}

func TestTaskSlugs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var slugs []string
	for range 3 {
		slugs = append(slugs, b.create(t, b.a.member, task.NewTask{Title: "Fix login!"}).Slug)
	}
	require.Equal(t, []string{"fix-login", "fix-login-2", "fix-login-3"}, slugs)
	require.Equal(t, "fix-login-2-2", b.create(t, b.a.member, task.NewTask{Title: "Fix login 2"}).Slug)
	require.Equal(t, "fix-login-page", b.create(t, b.a.member, task.NewTask{Title: "Fix login page"}).Slug)
	// Slugs are per project and per tenant.
	require.Equal(t, "fix-login", b.create(t, b.a.member, task.NewTask{ProjectID: b.a.project2, Title: "Fix login"}).Slug)
	require.Equal(t, "fix-login", b.create(t, b.b.member, task.NewTask{Title: "Fix login"}).Slug)
	// Nothing sluggable left.
	require.Equal(t, "task", b.create(t, b.a.member, task.NewTask{Title: "日本語"}).Slug)
	require.Equal(t, "task-2", b.create(t, b.a.member, task.NewTask{Title: "???"}).Slug)

	// The slug stays when the title changes.
	first := b.create(t, b.a.member, task.NewTask{Title: "Stable"})
	changed, err := b.svc.Update(b.a.member, first.ID, task.Patch{Title: ptr("Something else")})
	require.NoError(t, err)
	require.Equal(t, "stable", changed.Slug)

	// Concurrent creations with one title get distinct slugs, none fails.
	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			tk, err := b.svc.Create(b.a.member, task.NewTask{Title: "Race"})
			got[i], errs[i] = tk.Slug, err
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i])
		require.False(t, seen[got[i]], "slug %s given twice", got[i])
		seen[got[i]] = true
	}
	require.True(t, seen["race"] && seen[fmt.Sprintf("race-%d", n)], "%v", got)
}

func TestTaskValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	manyTags := make([]string, task.MaxTags+1)
	for i := range manyTags {
		manyTags[i] = fmt.Sprintf("t%d", i)
	}
	for _, c := range []struct {
		name  string
		in    task.NewTask
		field string
	}{
		{"empty title", task.NewTask{Title: "   "}, "title"},
		{"long title", task.NewTask{Title: strings.Repeat("é", task.MaxTitleChars+1)}, "title"},
		{"control in title", task.NewTask{Title: "a\nb"}, "title"},
		{"bad utf-8 title", task.NewTask{Title: "a\xffb"}, "title"},
		{"long description", task.NewTask{Title: "x", Description: strings.Repeat("a", task.MaxTextChars+1)}, "description"},
		{"long criteria", task.NewTask{Title: "x", AcceptanceCriteria: strings.Repeat("a", task.MaxTextChars+1)}, "acceptanceCriteria"},
		{"too many tags", task.NewTask{Title: "x", Tags: manyTags}, "tags"},
		{"empty tag", task.NewTask{Title: "x", Tags: []string{"ok", " "}}, "tags"},
		{"long tag", task.NewTask{Title: "x", Tags: []string{strings.Repeat("t", task.MaxTagChars+1)}}, "tags"},
		{"priority", task.NewTask{Title: "x", Priority: "URGENT"}, "priority"},
		{"type", task.NewTask{Title: "x", Type: "EPIC"}, "type"},
		{"complexity", task.NewTask{Title: "x", Complexity: "HUGE"}, "complexity"},
		{"source", task.NewTask{Title: "x", Source: strings.Repeat("s", task.MaxSourceChars+1)}, "source"},
	} {
		_, err := b.svc.Create(b.a.member, c.in)
		requireCode(t, err, apperr.BadUserInput, c.field)
	}
	// Exactly at the limits is fine.
	_, err := b.svc.Create(b.a.member, task.NewTask{Title: strings.Repeat("é", task.MaxTitleChars), Tags: manyTags[:task.MaxTags]})
	require.NoError(t, err)
}

func TestTaskUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tk := b.create(t, b.a.member, task.NewTask{Title: "Write docs", Description: "All of them", AcceptanceCriteria: "Done", Tags: []string{"docs"}})

	got, err := b.svc.Update(b.a.member, tk.ID, task.Patch{Priority: ptr("CRITICAL"), Status: ptr("READY")})
	require.NoError(t, err)
	require.Equal(t, "CRITICAL", got.Priority)
	require.Equal(t, task.StatusReady, got.Status)
	require.Equal(t, "Write docs", got.Title, "omitted fields stay")
	require.Equal(t, "All of them", *got.Description)
	require.Equal(t, []string{"docs"}, got.Tags)
	require.True(t, got.UpdatedAt.After(tk.UpdatedAt) || got.UpdatedAt.Equal(tk.UpdatedAt))

	got, err = b.svc.Update(b.a.member, tk.ID, task.Patch{
		Title: ptr(" Write the docs "), Description: ptr(""), AcceptanceCriteria: ptr("Reviewed"), Tags: []string{},
		Type: ptr("BUG"), Complexity: ptr("SIMPLE"),
	})
	require.NoError(t, err)
	require.Equal(t, "Write the docs", got.Title)
	require.Nil(t, got.Description, "an empty string clears it")
	require.Equal(t, "Reviewed", *got.AcceptanceCriteria)
	require.Empty(t, got.Tags, "[] clears the tags")
	require.Equal(t, []string{"BUG", "SIMPLE", "CRITICAL"}, []string{got.Type, got.Complexity, got.Priority})
	require.Equal(t, task.StatusReady, got.Status)

	for _, c := range []struct {
		p     task.Patch
		field string
	}{
		{task.Patch{Title: ptr("")}, "title"},
		{task.Patch{Status: ptr("CLOSED")}, "status"},
		{task.Patch{Priority: ptr("")}, "priority"},
		{task.Patch{Tags: []string{""}}, "tags"},
	} {
		_, err := b.svc.Update(b.a.member, tk.ID, c.p)
		requireCode(t, err, apperr.BadUserInput, c.field)
	}
	_, err = b.svc.Update(b.a.viewer, tk.ID, task.Patch{Title: ptr("viewer")})
	requireCode(t, err, apperr.Forbidden, "")
	_, err = b.svc.Update(b.b.member, tk.ID, task.Patch{Title: ptr("other tenant")})
	requireCode(t, err, apperr.NotFound, "")
	_, err = b.svc.Update(b.a.member, uuid.Must(uuid.NewV7()), task.Patch{Title: ptr("missing")})
	requireCode(t, err, apperr.NotFound, "")
	require.Equal(t, "Write the docs", func() string { g, _ := b.svc.Get(b.a.member, tk.ID); return g.Title }())
}

func TestTaskList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	for i := range 5 {
		ids = append(ids, b.create(t, b.a.member, task.NewTask{Title: fmt.Sprintf("Task %d", i)}).ID)
	}
	b.create(t, b.a.member, task.NewTask{ProjectID: b.a.project2, Title: "elsewhere"})
	b.create(t, b.b.member, task.NewTask{Title: "other tenant"})

	page, err := b.svc.List(b.a.viewer, uuid.Nil, uuid.Nil, 3)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[4], ids[3], ids[2]}, taskIDs(page), "newest first")
	page, err = b.svc.List(b.a.viewer, b.a.project, page[2].ID, 3)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[1], ids[0]}, taskIDs(page))
	other, err := b.svc.List(b.a.viewer, b.a.project2, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, other, 1)
	_, err = b.svc.List(b.b.viewer, b.a.project, uuid.Nil, 10)
	requireCode(t, err, apperr.NotFound, "")
}

func taskIDs(ts []dbsqlc.Task) []uuid.UUID {
	out := make([]uuid.UUID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestTaskRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tk := b.create(t, b.a.member, task.NewTask{
		Title: "Add a README", Description: "Explain the project.", AcceptanceCriteria: "README.md exists.",
		Tags: []string{"docs", "onboarding"}, Complexity: "COMPLEX",
	})

	r, err := b.svc.Run(b.a.member, tk.ID)
	require.NoError(t, err)
	require.Equal(t, run.KindTask, r.Kind)
	require.Equal(t, run.StatusQueued, r.Status)
	require.Equal(t, uuid.NullUUID{UUID: tk.ID, Valid: true}, r.TaskID)
	require.Equal(t, b.a.userID, r.UserID)
	require.EqualValues(t, 4, r.MaxAttempts, "maxRetries 3 + 1")
	require.True(t, r.ConversationID.Valid && r.TriggerMessageID.Valid)
	require.Equal(t, task.StatusReady, b.status(t, b.a, tk.ID), "OPEN -> READY")

	// Exactly one job, of kind "run", naming the run.
	job := rivertest.RequireInserted(ctx, t, b.driver, run.Args{}, &rivertest.RequireInsertedOpts{MaxAttempts: 4, Queue: river.QueueDefault})
	require.Equal(t, run.Args{TenantID: b.a.id, RunID: r.ID}, job.Args)

	b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		conv, err := tx.Q.ConversationGet(ctx, dbsqlc.ConversationGetParams{TenantID: b.a.id, ID: r.ConversationID.UUID})
		require.NoError(t, err)
		require.Equal(t, "TASK", conv.Kind)
		require.Equal(t, "Task: Add a README", *conv.Title)
		require.Equal(t, testModel, conv.Model)
		require.True(t, conv.Agentic)
		require.Equal(t, tk.ProjectID, conv.ProjectID)
		require.Equal(t, uuid.NullUUID{UUID: r.ID, Valid: true}, conv.ActiveRunID)
		msg, err := tx.Q.MessageGet(ctx, dbsqlc.MessageGetParams{TenantID: b.a.id, ID: r.TriggerMessageID.UUID})
		require.NoError(t, err)
		require.Equal(t, "USER", msg.Role)
		for _, want := range []string{"Add a README", "Explain the project.", "README.md exists.", "docs, onboarding", "COMPLEX", task.Instruction} {
			require.Contains(t, msg.Content, want)
		}
		evs, err := events.List(ctx, tx, b.a.id, r.ID, 0, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, events.TaskQueued, evs[0].Type)
		// The task's conversation is not among the user's chats.
		chats, err := tx.Q.ConversationList(ctx, dbsqlc.ConversationListParams{TenantID: b.a.id, UserID: b.a.userID, Lim: 10})
		require.NoError(t, err)
		require.Empty(t, chats)
		// The executor's limits for this run: COMPLEX doubles them.
		lim, err := task.Hooks{}.Limits(ctx, tx, r)
		require.NoError(t, err)
		require.Equal(t, agent.Limits{MaxTurns: 200, MaxDuration: time.Hour, ConfirmAfter: 20}, lim)
		return nil
	})

	// A second run while the first has not ended: CONFLICT, and no second job.
	_, err = b.svc.Run(b.a.member, tk.ID)
	requireCode(t, err, apperr.Conflict, "")
	runs, err := b.svc.Runs(b.a.member, tk.ID, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	// A task's run is its starter's, as a conversation is: another member sees none of it.
	runs, err = b.svc.Runs(b.a.viewer, tk.ID, uuid.Nil, 10)
	require.NoError(t, err)
	require.Empty(t, runs)

	// Roles and tenancy.
	_, err = b.svc.Run(b.a.viewer, tk.ID)
	requireCode(t, err, apperr.Forbidden, "")
	_, err = b.svc.Run(b.b.member, tk.ID)
	requireCode(t, err, apperr.NotFound, "")

	// Cancelled before any worker took it: the task stays READY and can run again.
	_, err = b.runs.Cancel(b.a.member, r.ID)
	require.NoError(t, err)
	require.Equal(t, task.StatusReady, b.status(t, b.a, tk.ID))
	r2, err := b.svc.Run(b.a.member, tk.ID)
	require.NoError(t, err)
	require.NotEqual(t, r.ConversationID, r2.ConversationID, "each run has its own conversation")
	runs, err = b.svc.Runs(b.a.member, tk.ID, uuid.Nil, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{r2.ID, r.ID}, []uuid.UUID{runs[0].ID, runs[1].ID})

	// A DONE task does not run.
	done := b.create(t, b.a.member, task.NewTask{Title: "Already done"})
	_, err = b.svc.Update(b.a.member, done.ID, task.Patch{Status: ptr(string(task.StatusDone))})
	require.NoError(t, err)
	_, err = b.svc.Run(b.a.member, done.ID)
	requireCode(t, err, apperr.Conflict, "")
}

func TestTaskHooks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := task.Hooks{}
	start := func(id uuid.UUID) dbsqlc.Run {
		t.Helper()
		r, err := b.svc.Run(b.a.member, id)
		require.NoError(t, err)
		b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error { return h.Started(ctx, tx, r) })
		require.Equal(t, task.StatusInProgress, b.status(t, b.a, id))
		return r
	}
	finish := func(r dbsqlc.Run, status run.Status, reason string) {
		t.Helper()
		r.Status, r.TerminationReason = status, &reason
		b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error { return h.Finished(ctx, tx, r) })
	}

	tk := b.create(t, b.a.member, task.NewTask{Title: "Hooked"})
	r := start(tk.ID)
	finish(r, run.StatusCompleted, agent.ReasonCompleted)
	require.Equal(t, task.StatusDone, b.status(t, b.a, tk.ID), "the model stopped on its own")

	for _, end := range []struct {
		status run.Status
		reason string
	}{
		{run.StatusFailed, "retries_exhausted"},
		{run.StatusCancelled, "user_cancel"},
		{run.StatusTimedOut, "max_duration"},
		{run.StatusCompleted, agent.ReasonMaxTurns},
		{run.StatusCompleted, agent.ReasonUserStop},
	} {
		tk := b.create(t, b.a.member, task.NewTask{Title: "Hooked " + end.reason})
		finish(start(tk.ID), end.status, end.reason)
		require.Equal(t, task.StatusReady, b.status(t, b.a, tk.ID), "%s (%s)", end.status, end.reason)
	}

	// The user closed the task during the run: a failed run leaves it DONE, and Started does not
	// reopen it.
	closed := b.create(t, b.a.member, task.NewTask{Title: "Closed by hand"})
	r = start(closed.ID)
	_, err := b.svc.Update(b.a.member, closed.ID, task.Patch{Status: ptr(string(task.StatusDone))})
	require.NoError(t, err)
	b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error { return h.Started(ctx, tx, r) })
	finish(r, run.StatusFailed, "retries_exhausted")
	require.Equal(t, task.StatusDone, b.status(t, b.a, closed.ID))

	// Runs of other kinds (no task) are left alone.
	b.in(t, b.a, func(ctx context.Context, tx *db.Tx) error {
		other := dbsqlc.Run{TenantID: b.a.id, ID: uuid.Must(uuid.NewV7()), Kind: run.KindChatTurn, Status: run.StatusCompleted}
		require.NoError(t, h.Started(ctx, tx, other))
		require.NoError(t, h.Finished(ctx, tx, other))
		lim, err := h.Limits(ctx, tx, other)
		require.NoError(t, err)
		require.Equal(t, task.LimitsFor(task.ComplexityStandard), lim)
		return nil
	})
}
