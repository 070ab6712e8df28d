package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/llm/llmtest"
	"github.com/agentry/agentry/internal/workspace"
)

// stepLane is one tenant whose conversation runs multi-file steps; files is what its
// workspace must hold once its current step has committed.
type stepLane struct {
	token    string
	tenantID uuid.UUID
	project  uuid.UUID
	conv     string
	files    map[string]string
	runID    string
	before   string // tree hash before the current step
	after    string // tree hash after it
	lockPath string // the file whose row the test holds locked, stalling the step on it
}

// stepOps is the multi-file step of iteration n (n >= 1): create a file, edit one, replace one,
// delete the one the previous step created, edit another. files is updated to the state after
// it.
func stepOps(n int, files map[string]string) []map[string]string {
	ops := []map[string]string{
		{"tool": "write_file", "path": fmt.Sprintf("new/n%d.txt", n), "content": fmt.Sprintf("created by step %d\n", n)},
		{"tool": "edit_file", "path": "a.txt", "old_string": fmt.Sprintf("a %d", n-1), "new_string": fmt.Sprintf("a %d", n)},
		{"tool": "write_file", "path": "b.txt", "content": fmt.Sprintf("b %d\nsecond line\n", n)},
		{"tool": "delete_file", "path": fmt.Sprintf("new/n%d.txt", n-1)},
		{"tool": "edit_file", "path": "c.txt", "old_string": fmt.Sprintf("c %d", n-1), "new_string": fmt.Sprintf("c %d", n)},
	}
	files[ops[0]["path"]] = ops[0]["content"]
	files["a.txt"] = fmt.Sprintf("a %d\nkept\n", n)
	files["b.txt"] = ops[2]["content"]
	delete(files, ops[3]["path"])
	files["c.txt"] = fmt.Sprintf("first\nc %d\nlast\n", n)
	return ops
}

func manifestHash(files map[string]string) string {
	m := map[string][]byte{}
	for p, c := range files {
		sum := sha256.Sum256([]byte(c))
		m[p] = sum[:]
	}
	return workspace.ManifestHash(m)
}

var stepMark = regexp.MustCompile(`stepmark (\d+) (\d+)`)

// TestStepAtomicUnderSIGKILL: a worker process is SIGKILLed 50 times in the middle of a
// multi-file tool step (5 calls: create, edit, replace, delete, edit), each kill interrupting
// the steps of three tenants at once. The kill lands inside the step for certain: the test holds
// a row lock on one file the step changes (chosen at random: the 2nd to 5th call), waits until
// every step is blocked on it (so the calls before it have run in the step's transaction), and
// kills. Right after each kill every tenant's workspace tree hash is the one before the step or
// the one after it (in fact before: the step never committed); once the run is resumed on a new
// worker and finishes, it is exactly the one after, and the step was applied once: five
// journal entries and five file versions per run, every call COMPLETED once.
func TestStepAtomicUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	t.Parallel()
	apptest.Serial(t)
	const kills, lanes = 50, 3
	srv := llmtest.NewOpenAIServer(t)
	llmEnv := map[string]string{"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": srv.BaseURL(), "AGENTRY_DEFAULT_MODEL": "openai:gpt-4o-mini"}
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: llmEnv})
	srv.SetResponder(func(req llmtest.Request) llmtest.Reply {
		// The newest user message names the lane and the step; a tool result after it means the
		// step ran, and the model is done.
		msgs := req.Messages()
		lane, n, toolAfter := -1, -1, false
		for _, m := range msgs {
			raw, _ := json.Marshal(m)
			if m["role"] == "user" {
				if mm := stepMark.FindStringSubmatch(string(raw)); mm != nil {
					lane, _ = strconv.Atoi(mm[1])
					n, _ = strconv.Atoi(mm[2])
					toolAfter = false
				}
			}
			if m["role"] == "tool" {
				toolAfter = true
			}
		}
		if n < 0 || toolAfter {
			return llmtest.Stream(llmtest.Text("step done"))
		}
		var steps []llmtest.Step
		for k, op := range stepOps(n, map[string]string{}) {
			args := map[string]string{}
			for key, v := range op {
				if key != "tool" {
					args[key] = v
				}
			}
			raw, _ := json.Marshal(args)
			steps = append(steps, llmtest.ToolCall(fmt.Sprintf("call_%d_%d_%d", lane, n, k), op["tool"], string(raw)))
		}
		return llmtest.Stream(steps...)
	})
	wenv := map[string]string{"AGENTRY_WORKER_CONCURRENCY": "10", "AGENTRY_RETRY_BASE_DELAY": "100ms",
		// Each lane's step holds a connection while it waits on the test's lock; the leases'
		// renewals need one more.
		"DATABASE_URL": dbtest.PoolURLOf(env.OwnerURL, lanes+2)}
	for k, v := range llmEnv {
		wenv[k] = v
	}

	ctx := context.Background()
	owner, err := pgx.Connect(ctx, env.OwnerURL)
	require.NoError(t, err)
	defer owner.Close(ctx)
	system := func(fn func(tx pgx.Tx) error) {
		t.Helper()
		tx, err := owner.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
		require.NoError(t, err)
		require.NoError(t, fn(tx))
		require.NoError(t, tx.Commit(ctx))
	}
	treeHash := func(l *stepLane) string {
		var h string
		require.NoError(t, env.App.DB.InTx(ctx, l.tenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			h, err = workspace.TreeHash(ctx, tx, l.tenantID, l.project)
			return err
		}))
		return h
	}

	ls := make([]*stepLane, lanes)
	for i := range ls {
		name := fmt.Sprintf("step-lane-%d-%d", i, time.Now().UnixNano())
		s := env.SignUp(t, "", name)
		l := &stepLane{token: s.AccessToken, files: map[string]string{
			"a.txt": "a 0\nkept\n", "b.txt": "b 0\n", "c.txt": "first\nc 0\nlast\n", "new/n0.txt": "created by the seed\n",
		}}
		system(func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT t.id, p.id FROM tenants t JOIN projects p ON p.tenant_id = t.id WHERE t.name = $1`, name).Scan(&l.tenantID, &l.project)
		})
		env.Do(t, l.token, `mutation { updateAgentSettings(input: {autoExecute: true, approvalThreshold: 100}) { autoExecute } }`, nil).Decode(t, &struct{}{})
		var conv struct{ CreateConversation struct{ ID string } }
		env.Do(t, l.token, `mutation { createConversation(input: {model: "openai:gpt-4o-mini", title: "steps"}) { id } }`, nil).Decode(t, &conv)
		l.conv = conv.CreateConversation.ID
		require.NoError(t, env.App.DB.InTx(ctx, l.tenantID, func(ctx context.Context, tx *db.Tx) error {
			for p, c := range l.files {
				if _, err := (&workspace.Store{}).Write(ctx, tx, l.tenantID, l.project, p, c); err != nil {
					return err
				}
			}
			return nil
		}))
		require.Equal(t, manifestHash(l.files), treeHash(l))
		ls[i] = l
	}

	waitDone := func(deadline time.Duration) {
		t.Helper()
		until := time.Now().Add(deadline)
		for {
			open := 0
			for _, l := range ls {
				var st struct{ Run struct{ Status string } }
				env.Do(t, l.token, `query($id: ID!) { run(id: $id) { status } }`, map[string]any{"id": l.runID}).Decode(t, &st)
				switch st.Run.Status {
				case "COMPLETED":
				case "FAILED", "CANCELLED", "TIMED_OUT":
					t.Fatalf("run %s ended %s", l.runID, st.Run.Status)
				default:
					open++
				}
			}
			if open == 0 {
				return
			}
			require.True(t, time.Now().Before(until), "runs not finished after %s", deadline)
			time.Sleep(20 * time.Millisecond)
		}
	}

	// One connection per lane holds its lock (a connection has one transaction at a time).
	lockConns := make([]*pgx.Conn, lanes)
	for i := range lockConns {
		lockConns[i], err = pgx.Connect(ctx, env.OwnerURL)
		require.NoError(t, err)
		defer lockConns[i].Close(ctx)
	}
	w := startWorker(t, env, wenv)
	for n := 1; n <= kills; n++ {
		// Lock one file each step will change (not its first call's), then start the steps.
		lockers := make([]pgx.Tx, lanes)
		pids := make([]int, lanes)
		for i, l := range ls {
			l.before = manifestHash(l.files)
			ops := stepOps(n, l.files)
			l.after = manifestHash(l.files)
			l.lockPath = ops[1+rand.IntN(len(ops)-1)]["path"]
			tx, err := lockConns[i].Begin(ctx)
			require.NoError(t, err)
			lockers[i] = tx
			_, err = tx.Exec(ctx, `SELECT set_config('app.system', 'on', true)`)
			require.NoError(t, err)
			var found int
			require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM workspace_files WHERE tenant_id = $1 AND project_id = $2 AND path = $3 FOR UPDATE) f`,
				l.tenantID, l.project, l.lockPath).Scan(&found))
			require.Equal(t, 1, found, "lane %d step %d: %s", i, n, l.lockPath)
			require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pids[i]))
			var res struct {
				SendMessage struct{ Run struct{ ID string } }
			}
			env.Do(t, l.token, `mutation($in: SendMessageInput!) { sendMessage(input: $in) { run { id } } }`,
				map[string]any{"in": map[string]any{"conversationId": l.conv, "content": fmt.Sprintf("stepmark %d %d", i, n)}}).Decode(t, &res)
			l.runID = res.SendMessage.Run.ID
		}
		// Wait until every step is blocked on its lane's lock: the calls before it have run.
		deadline := time.Now().Add(20 * time.Second)
		for {
			blocked := 0
			for _, pid := range pids {
				var k int
				system(func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&k)
				})
				if k > 0 {
					blocked++
				}
			}
			if blocked == lanes {
				break
			}
			require.True(t, time.Now().Before(deadline), "step %d: only %d of %d steps reached their lock", n, blocked, lanes)
			time.Sleep(5 * time.Millisecond)
		}
		w.kill()
		next := startWorker(t, env, wenv)
		for i, l := range ls {
			h := treeHash(l)
			require.Contains(t, []string{l.before, l.after}, h, "lane %d step %d: the tree is neither before nor after the step (locked %s)", i, n, l.lockPath)
			require.Equal(t, l.before, h, "lane %d step %d: a step that never committed changed the tree", i, n)
		}
		for _, tx := range lockers {
			require.NoError(t, tx.Rollback(ctx))
		}
		// The killed worker's lease would expire within 15 s; expire it now and reap.
		system(func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE status = 'RUNNING'`)
			return err
		})
		// (A worker's own reaper may take some of them first.)
		_, err := env.App.Runs.ReapExpired(ctx)
		require.NoError(t, err)
		w = next
		waitDone(30 * time.Second)
		for i, l := range ls {
			require.Equal(t, l.after, treeHash(l), "lane %d step %d: the resumed run did not finish the step exactly once", i, n)
		}
	}

	// The step of every run was applied once: five journal entries, five versions and five
	// completed calls per run; each resumed run was started twice (before and after its kill).
	var runs, journal, versions, completed, restarted int
	system(func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM runs WHERE status = 'COMPLETED'),
			(SELECT count(*) FROM workspace_journal),
			(SELECT count(*) FROM workspace_file_versions WHERE run_id IS NOT NULL),
			(SELECT count(*) FROM tool_calls WHERE status = 'COMPLETED'),
			(SELECT count(*) FROM (SELECT run_id FROM run_events WHERE type = 'execution.started' GROUP BY run_id HAVING count(*) = 2) s)`).
			Scan(&runs, &journal, &versions, &completed, &restarted)
	})
	require.Equal(t, kills*lanes, runs)
	require.Equal(t, 5*kills*lanes, journal)
	require.Equal(t, 5*kills*lanes, versions)
	require.Equal(t, 5*kills*lanes, completed)
	require.Equal(t, kills*lanes, restarted, "every run was interrupted once and resumed once")
}
