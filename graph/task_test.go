package graph_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// taskEnv is agentry (workers optional) whose default model is served by a test Anthropic
// server, with one signed-up owner.
type taskEnv struct {
	*apptest.Env
	llm *llmtest.Server
	s   apptest.Session
}

func newTaskEnv(t *testing.T, work bool) *taskEnv {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t)
	e := apptest.Start(t, apptest.Options{NoWork: !work, Env: map[string]string{
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.BaseURL(),
		"AGENTRY_DEFAULT_MODEL": "anthropic:claude-sonnet-4-5",
	}})
	return &taskEnv{Env: e, llm: srv, s: e.SignUp(t, "", "")}
}

const taskFields = `id title description acceptanceCriteria tags status priority type slug complexity source projectId createdAt updatedAt`

type taskView struct {
	ID, Title, Status, Priority, Type, Slug, Complexity, Source, ProjectID string
	Description, AcceptanceCriteria                                        *string
	Tags                                                                   []string
}

func (e *taskEnv) createTask(t *testing.T, token string, in map[string]any) (taskView, *apptest.Response) {
	t.Helper()
	res := e.Do(t, token, `mutation($in: CreateTaskInput!) { createTask(input: $in) { `+taskFields+` } }`, map[string]any{"in": in})
	if len(res.Errors) > 0 {
		return taskView{}, res
	}
	var out struct{ CreateTask taskView }
	res.Decode(t, &out)
	return out.CreateTask, res
}

func (e *taskEnv) mustCreateTask(t *testing.T, in map[string]any) taskView {
	t.Helper()
	tk, res := e.createTask(t, e.s.AccessToken, in)
	require.Empty(t, res.Errors, "%s", res.Body)
	return tk
}

func (e *taskEnv) task(t *testing.T, id string) taskView {
	t.Helper()
	var out struct{ Task taskView }
	e.Do(t, e.s.AccessToken, `query($id: ID!) { task(id: $id) { `+taskFields+` } }`, map[string]any{"id": id}).Decode(t, &out)
	return out.Task
}

type taskRunView struct {
	ID, Kind, Status  string
	TerminationReason *string
	Error             *string
	FailureClass      *string
	Task              *struct{ ID string }
	Conversation      *struct{ ID string }
}

const taskRunFields = `id kind status terminationReason error failureClass task { id } conversation { id }`

func (e *taskEnv) runTask(t *testing.T, token, id string) (taskRunView, *apptest.Response) {
	t.Helper()
	res := e.Do(t, token, `mutation($id: ID!) { runTask(id: $id) { `+taskRunFields+` } }`, map[string]any{"id": id})
	if len(res.Errors) > 0 {
		return taskRunView{}, res
	}
	var out struct{ RunTask taskRunView }
	res.Decode(t, &out)
	return out.RunTask, res
}

// waitTaskRun polls the run until it is terminal (bounded).
func (e *taskEnv) waitTaskRun(t *testing.T, id string, timeout time.Duration) taskRunView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var out struct{ Run taskRunView }
		e.Do(t, e.s.AccessToken, `query($id: ID!) { run(id: $id) { `+taskRunFields+` } }`, map[string]any{"id": id}).Decode(t, &out)
		switch out.Run.Status {
		case "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT":
			return out.Run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after %s", id, out.Run.Status, timeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// countRows runs a count query as the database owner across tenants.
func (e *taskEnv) countRows(t *testing.T, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// Row-level security is forced for the owner too: look across tenants explicitly.
	_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, sql, args...).Scan(&n))
	return n
}

// apiKey makes an API key of the owner's tenant with role and returns its secret.
func (e *taskEnv) apiKey(t *testing.T, role string) string {
	t.Helper()
	var out struct {
		CreateAPIKey struct{ Secret string } `json:"createApiKey"`
	}
	e.Do(t, e.s.AccessToken, `mutation($in: CreateApiKeyInput!) { createApiKey(input: $in) { secret } }`,
		map[string]any{"in": map[string]any{"name": "task-" + role, "role": role}}).Decode(t, &out)
	return out.CreateAPIKey.Secret
}

func requireTaskError(t *testing.T, res *apptest.Response, code, field string) {
	t.Helper()
	require.NotEmpty(t, res.Errors, "%s", res.Body)
	require.Equal(t, code, res.Code(), "%s", res.Body)
	if field != "" {
		require.Equal(t, field, res.Errors[0].Extensions["field"], "%s", res.Body)
	}
}

func TestTaskCreateUpdateAndRead(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, false)

	tk := e.mustCreateTask(t, map[string]any{"title": "Fix the login page"})
	require.Equal(t, "Fix the login page", tk.Title)
	require.Equal(t, "fix-the-login-page", tk.Slug)
	require.Equal(t, []string{"OPEN", "MEDIUM", "TASK", "STANDARD", "user"}, []string{tk.Status, tk.Priority, tk.Type, tk.Complexity, tk.Source})
	require.Equal(t, []string{}, tk.Tags)
	require.Nil(t, tk.Description)
	typ, _ := isoDecodeID(t, tk.ID)
	require.Equal(t, "Task", typ)

	require.Equal(t, "fix-the-login-page-2", e.mustCreateTask(t, map[string]any{"title": "Fix the LOGIN page"}).Slug)
	full := e.mustCreateTask(t, map[string]any{
		"title": "Dark mode", "description": "Users want it", "acceptanceCriteria": "A toggle", "tags": []string{"ui", "theme"},
		"priority": "HIGH", "type": "FEATURE", "complexity": "COMPLEX", "projectId": tk.ProjectID,
	})
	require.Equal(t, []string{"HIGH", "FEATURE", "COMPLEX"}, []string{full.Priority, full.Type, full.Complexity})
	require.Equal(t, []string{"ui", "theme"}, full.Tags)
	require.Equal(t, "A toggle", *full.AcceptanceCriteria)
	require.Equal(t, tk.ProjectID, full.ProjectID)

	// Bad input names the field.
	_, res := e.createTask(t, e.s.AccessToken, map[string]any{"title": "  "})
	requireTaskError(t, res, "BAD_USER_INPUT", "title")
	_, res = e.createTask(t, e.s.AccessToken, map[string]any{"title": "x", "tags": []string{""}})
	requireTaskError(t, res, "BAD_USER_INPUT", "tags")
	_, res = e.createTask(t, e.s.AccessToken, map[string]any{"title": "x", "priority": "URGENT"})
	require.NotEmpty(t, res.Errors, "an unknown enum value is refused: %s", res.Body)

	// updateTask changes what it is given, nothing else.
	const update = `mutation($id: ID!, $in: UpdateTaskInput!) { updateTask(id: $id, input: $in) { ` + taskFields + ` } }`
	var upd struct{ UpdateTask taskView }
	e.Do(t, e.s.AccessToken, update, map[string]any{"id": full.ID, "in": map[string]any{
		"status": "READY", "priority": "LOW", "description": "", "tags": []string{"ui"}, "title": "Dark mode v2",
	}}).Decode(t, &upd)
	require.Equal(t, []string{"READY", "LOW", "FEATURE", "COMPLEX", "Dark mode v2", "dark-mode"},
		[]string{upd.UpdateTask.Status, upd.UpdateTask.Priority, upd.UpdateTask.Type, upd.UpdateTask.Complexity, upd.UpdateTask.Title, upd.UpdateTask.Slug})
	require.Nil(t, upd.UpdateTask.Description)
	require.Equal(t, "A toggle", *upd.UpdateTask.AcceptanceCriteria)
	require.Equal(t, []string{"ui"}, upd.UpdateTask.Tags)
	require.Equal(t, upd.UpdateTask, e.task(t, full.ID))
	res = e.Do(t, e.s.AccessToken, update, map[string]any{"id": full.ID, "in": map[string]any{"title": ""}})
	requireTaskError(t, res, "BAD_USER_INPUT", "title")

	// node(id) finds a task.
	var node struct {
		Node struct {
			Typename string `json:"__typename"`
			ID, Slug string
		}
	}
	e.Do(t, e.s.AccessToken, `query($id: ID!) { node(id: $id) { __typename id ... on Task { slug } } }`, map[string]any{"id": tk.ID}).Decode(t, &node)
	require.Equal(t, "Task", node.Node.Typename)
	require.Equal(t, tk.Slug, node.Node.Slug)

	// VIEWER reads, cannot write.
	viewer := e.apiKey(t, "VIEWER")
	var seen struct{ Task struct{ ID string } }
	e.Do(t, viewer, `query($id: ID!) { task(id: $id) { id } }`, map[string]any{"id": tk.ID}).Decode(t, &seen)
	require.Equal(t, tk.ID, seen.Task.ID)
	_, res = e.createTask(t, viewer, map[string]any{"title": "viewer"})
	requireTaskError(t, res, "FORBIDDEN", "")
	res = e.Do(t, viewer, update, map[string]any{"id": tk.ID, "in": map[string]any{"title": "viewer"}})
	requireTaskError(t, res, "FORBIDDEN", "")
	_, res = e.runTask(t, viewer, tk.ID)
	requireTaskError(t, res, "FORBIDDEN", "")
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM runs`))

	// A MEMBER writes.
	member := e.apiKey(t, "MEMBER")
	_, res = e.createTask(t, member, map[string]any{"title": "by a member"})
	require.Empty(t, res.Errors, "%s", res.Body)

	// Another tenant's task is NOT_FOUND everywhere, like a missing one.
	other := e.SignUp(t, "", "Other")
	for name, res := range map[string]*apptest.Response{
		"task":       e.Do(t, other.AccessToken, `query($id: ID!) { task(id: $id) { id } }`, map[string]any{"id": tk.ID}),
		"updateTask": e.Do(t, other.AccessToken, update, map[string]any{"id": tk.ID, "in": map[string]any{"title": "stolen"}}),
		"runTask":    e.Do(t, other.AccessToken, `mutation($id: ID!) { runTask(id: $id) { id } }`, map[string]any{"id": tk.ID}),
		"tasks":      e.Do(t, other.AccessToken, `query($p: ID) { tasks(projectId: $p) { edges { node { id } } } }`, map[string]any{"p": tk.ProjectID}),
	} {
		requireTaskError(t, res, "NOT_FOUND", "")
		require.NotContains(t, string(res.Body), "Fix the login page", name)
	}
	requireNodeNull(t, e.Do(t, other.AccessToken, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": tk.ID}), "node(another tenant's task)")
	var otherList struct {
		Tasks struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	e.Do(t, other.AccessToken, `{ tasks { edges { node { id } } } }`, nil).Decode(t, &otherList)
	require.Empty(t, otherList.Tasks.Edges)
	require.Equal(t, "Fix the login page", e.task(t, tk.ID).Title)
	require.Equal(t, 0, e.countRows(t, `SELECT count(*) FROM runs`))
}

func TestTaskListPagination(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, false)
	var ids []string
	for i := range 5 {
		ids = append(ids, e.mustCreateTask(t, map[string]any{"title": fmt.Sprintf("Task %d", i)}).ID)
	}
	type page struct {
		Tasks struct {
			Edges []struct {
				Cursor string
				Node   struct{ ID string }
			}
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
	}
	const list = `query($first: Int, $after: String) { tasks(first: $first, after: $after) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`
	var got []string
	var after any
	pages := 0
	for {
		var p page
		e.Do(t, e.s.AccessToken, list, map[string]any{"first": 2, "after": after}).Decode(t, &p)
		pages++
		for _, edge := range p.Tasks.Edges {
			got = append(got, edge.Node.ID)
		}
		if !p.Tasks.PageInfo.HasNextPage {
			break
		}
		require.Equal(t, p.Tasks.Edges[len(p.Tasks.Edges)-1].Cursor, *p.Tasks.PageInfo.EndCursor)
		after = *p.Tasks.PageInfo.EndCursor
		require.Less(t, pages, 10)
	}
	require.Equal(t, 3, pages)
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, got, "newest first, each once")

	res := e.Do(t, e.s.AccessToken, list, map[string]any{"first": 2, "after": "not-a-cursor"})
	requireTaskError(t, res, "BAD_USER_INPUT", "after")
	res = e.Do(t, e.s.AccessToken, list, map[string]any{"first": 101})
	requireTaskError(t, res, "BAD_USER_INPUT", "first")
}

func TestTaskRunEnqueuesOneJob(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, false) // no workers: the run stays QUEUED
	tk := e.mustCreateTask(t, map[string]any{"title": "Write a README", "description": "Explain the project"})

	r, res := e.runTask(t, e.s.AccessToken, tk.ID)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "TASK", r.Kind)
	require.Equal(t, "QUEUED", r.Status)
	require.Equal(t, tk.ID, r.Task.ID)
	require.NotNil(t, r.Conversation)
	require.Equal(t, "READY", e.task(t, tk.ID).Status)
	require.Len(t, e.Jobs(t, "run"), 1)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM runs WHERE kind = 'TASK' AND task_id IS NOT NULL`))

	// A second run while the first has not ended: CONFLICT, no second run or job.
	_, res = e.runTask(t, e.s.AccessToken, tk.ID)
	requireTaskError(t, res, "CONFLICT", "")
	require.Len(t, e.Jobs(t, "run"), 1)
	require.Equal(t, 1, e.countRows(t, `SELECT count(*) FROM runs`))

	// The task lists its run; the run's conversation holds the task's prompt and is not a chat.
	var out struct {
		Task struct {
			Runs struct {
				Edges []struct{ Node struct{ ID, Kind string } }
			}
		}
		Conversations struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	e.Do(t, e.s.AccessToken, `query($id: ID!) { task(id: $id) { runs { edges { node { id kind } } } } conversations { edges { node { id } } } }`,
		map[string]any{"id": tk.ID}).Decode(t, &out)
	require.Len(t, out.Task.Runs.Edges, 1)
	require.Equal(t, r.ID, out.Task.Runs.Edges[0].Node.ID)
	require.Empty(t, out.Conversations.Edges, "a task run's conversation is not listed among the chats")
	var conv struct {
		Conversation struct {
			Title    string
			Messages struct {
				Edges []struct {
					Node struct{ Role, Content string }
				}
			}
		}
	}
	e.Do(t, e.s.AccessToken, `query($id: ID!) { conversation(id: $id) { title messages { edges { node { role content } } } } }`,
		map[string]any{"id": r.Conversation.ID}).Decode(t, &conv)
	require.Equal(t, "Task: Write a README", conv.Conversation.Title)
	require.Len(t, conv.Conversation.Messages.Edges, 1)
	require.Equal(t, "USER", conv.Conversation.Messages.Edges[0].Node.Role)
	require.Contains(t, conv.Conversation.Messages.Edges[0].Node.Content, "Explain the project")
	require.Contains(t, conv.Conversation.Messages.Edges[0].Node.Content, "Work on this task using the tools until it is done.")

	// A cancelled run frees the task for another.
	res = e.Do(t, e.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": r.ID})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "READY", e.task(t, tk.ID).Status)
	_, res = e.runTask(t, e.s.AccessToken, tk.ID)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, 2, e.countRows(t, `SELECT count(*) FROM runs WHERE kind = 'TASK'`))
}

func TestTaskRunCompletesTask(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, true)
	release := make(chan struct{})
	e.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		select { // the model answers once the test has seen the task IN_PROGRESS
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return llmtest.Stream(llmtest.Text("Done: the README explains the project."), llmtest.Usage(50, 8, 0))
	})
	tk := e.mustCreateTask(t, map[string]any{"title": "Write a README", "complexity": "SIMPLE"})

	r, res := e.runTask(t, e.s.AccessToken, tk.ID)
	require.Empty(t, res.Errors, "%s", res.Body)
	deadline := time.Now().Add(30 * time.Second)
	for e.task(t, tk.ID).Status != "IN_PROGRESS" {
		require.True(t, time.Now().Before(deadline), "the task never became IN_PROGRESS (status %s)", e.task(t, tk.ID).Status)
		time.Sleep(25 * time.Millisecond)
	}
	close(release)
	fin := e.waitTaskRun(t, r.ID, 30*time.Second)
	require.Equal(t, "COMPLETED", fin.Status, "error: %v", fin.Error)
	require.Equal(t, "completed", *fin.TerminationReason)
	require.Equal(t, "DONE", e.task(t, tk.ID).Status)
	require.GreaterOrEqual(t, e.llm.Calls(), 1)
	// The model saw the task.
	require.Contains(t, fmt.Sprint(e.llm.LastRequest(t).Messages()), "Write a README")

	// A DONE task does not run again.
	_, res = e.runTask(t, e.s.AccessToken, tk.ID)
	requireTaskError(t, res, "CONFLICT", "")
}

func TestTaskRunFailureReopensTask(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, true)
	e.llm.SetDefault(llmtest.Error(401, "invalid x-api-key"))
	tk := e.mustCreateTask(t, map[string]any{"title": "Doomed"})

	r, res := e.runTask(t, e.s.AccessToken, tk.ID)
	require.Empty(t, res.Errors, "%s", res.Body)
	fin := e.waitTaskRun(t, r.ID, 30*time.Second)
	require.Equal(t, "FAILED", fin.Status)
	require.Equal(t, "TERMINAL", *fin.FailureClass)
	require.Equal(t, "READY", e.task(t, tk.ID).Status, "a failed run puts the task back to READY")

	// It can run again.
	_, res = e.runTask(t, e.s.AccessToken, tk.ID)
	require.Empty(t, res.Errors, "%s", res.Body)
}
