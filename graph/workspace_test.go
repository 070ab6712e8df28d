package graph_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

// replyQueue answers each LLM request with the next queued reply.
type replyQueue struct {
	mu sync.Mutex
	q  []llmtest.Reply
}

func (r *replyQueue) push(replies ...llmtest.Reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q = append(r.q, replies...)
}

func (r *replyQueue) install(srv *llmtest.Server) {
	srv.SetResponder(func(llmtest.Request) llmtest.Reply {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.q) == 0 {
			return llmtest.Stream(llmtest.Text("nothing left to do"))
		}
		next := r.q[0]
		r.q = r.q[1:]
		return next
	})
}

func wsWrite(id, path, content string) llmtest.Reply {
	return llmtest.Stream(llmtest.ToolCall(id, "write_file", fmt.Sprintf(`{"path":%q,"content":%q}`, path, content)))
}

func wsEdit(id, path, old, new string) llmtest.Reply {
	return llmtest.Stream(llmtest.ToolCall(id, "edit_file", fmt.Sprintf(`{"path":%q,"old_string":%q,"new_string":%q}`, path, old, new)))
}

func wsDelete(id, path string) llmtest.Reply {
	return llmtest.Stream(llmtest.ToolCall(id, "delete_file", fmt.Sprintf(`{"path":%q}`, path)))
}

// wsTree returns the workspace as path -> sha256 of content, read through the API.
func (c *chatEnv) wsTree(t *testing.T, token string) map[string]string {
	t.Helper()
	var out struct {
		Workspace struct{ Files []struct{ Path string } }
	}
	c.Do(t, token, `{ workspace { files { path } } }`, nil).Decode(t, &out)
	tree := map[string]string{}
	for _, f := range out.Workspace.Files {
		var one struct {
			Workspace struct{ File struct{ Content string } }
		}
		c.Do(t, token, `query($p: String!) { workspace { file(path: $p) { content } } }`, map[string]any{"p": f.Path}).Decode(t, &one)
		sum := sha256.Sum256([]byte(one.Workspace.File.Content))
		tree[f.Path] = hex.EncodeToString(sum[:])
	}
	return tree
}

// rollbackApproval returns the run's pending approval of kind rollback.
func (c *chatEnv) rollbackApproval(t *testing.T, runID string) string {
	t.Helper()
	var out struct {
		Run struct {
			Approvals []struct{ ID, Kind, Status string }
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { approvals { id kind status } } }`, map[string]any{"id": runID}).Decode(t, &out)
	for _, a := range out.Run.Approvals {
		if a.Status == "PENDING" && a.Kind == "rollback" {
			return a.ID
		}
	}
	t.Fatalf("no pending rollback approval: %+v", out.Run.Approvals)
	return ""
}

func (c *chatEnv) resolveRollback(t *testing.T, token, id, choice string) (string, map[string]any) {
	t.Helper()
	res := c.Do(t, token, `mutation($id: ID!, $c: RollbackChoice!) { resolveRollback(approvalId: $id, choice: $c) { status note } }`,
		map[string]any{"id": id, "c": choice})
	if len(res.Errors) > 0 {
		return res.Code(), res.Errors[0].Extensions
	}
	return "", nil
}

func TestWorkspaceRollbackKeepContinueAndConflict(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	conv := c.conversation(t, nil)
	fail := llmtest.Error(401, "invalid x-api-key") // terminal: the run fails at once

	// A successful run creates the starting state; its snapshot is committed.
	q.push(wsWrite("s1", "b.txt", "b1\nb2\nb3\n"), wsWrite("s2", "c.txt", "to be deleted\n"), llmtest.Stream(llmtest.Text("seeded")))
	s, _ := c.send(t, conv, "seed", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	evs := c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "state.snapshot_created"))
	require.Equal(t, 1, countType(evs, "state.committed"))
	require.Equal(t, "execution.completed", evs[len(evs)-1].Type, "the terminal event stays last")
	seeded := c.wsTree(t, c.s.AccessToken)
	require.Len(t, seeded, 2)

	// A run writes, edits and deletes, then fails: the user is asked; ROLLBACK restores every
	// file byte-identical.
	q.push(wsWrite("a1", "a.txt", "new file\n"), wsEdit("a2", "b.txt", "b2", "B2"), wsDelete("a3", "c.txt"), fail)
	s, _ = c.send(t, conv, "change things", nil)
	r = c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "FAILED", r.Status)
	changed := c.wsTree(t, c.s.AccessToken)
	require.NotEqual(t, seeded, changed)
	require.Contains(t, changed, "a.txt")
	require.NotContains(t, changed, "c.txt")
	evs = c.eventsOf(t, s.RunID)
	require.Equal(t, 1, countType(evs, "state.snapshot_created"))
	require.Zero(t, countType(evs, "state.committed"))
	require.Equal(t, 1, countType(evs, "approval.requested"))
	ap := c.rollbackApproval(t, s.RunID)
	code, _ := c.resolveRollback(t, c.s.AccessToken, ap, "ROLLBACK")
	require.Empty(t, code)
	require.Equal(t, seeded, c.wsTree(t, c.s.AccessToken), "byte-identical after rollback")
	require.Equal(t, 1, countType(c.eventsOf(t, s.RunID), "state.rolled_back"))
	code, _ = c.resolveRollback(t, c.s.AccessToken, ap, "ROLLBACK")
	require.Equal(t, "CONFLICT", code, "decided once")

	// KEEP leaves the changes.
	q.push(wsWrite("k1", "a.txt", "kept\n"), fail)
	s, _ = c.send(t, conv, "change again", nil)
	require.Equal(t, "FAILED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	kept := c.wsTree(t, c.s.AccessToken)
	code, _ = c.resolveRollback(t, c.s.AccessToken, c.rollbackApproval(t, s.RunID), "KEEP")
	require.Empty(t, code)
	require.Equal(t, kept, c.wsTree(t, c.s.AccessToken))
	require.Contains(t, kept, "a.txt")
	require.Equal(t, 1, countType(c.eventsOf(t, s.RunID), "state.kept"))

	// A later change by someone else makes rollback refuse, naming the file, changing nothing.
	q.push(wsWrite("x1", "d.txt", "run's\n"), wsWrite("x2", "e.txt", "run's too\n"), fail)
	s, _ = c.send(t, conv, "change d and e", nil)
	require.Equal(t, "FAILED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	conflictRun := s.RunID
	conflictAp := c.rollbackApproval(t, conflictRun)
	q.push(wsEdit("o1", "e.txt", "run's too", "someone else's"), llmtest.Stream(llmtest.Text("edited")))
	s, _ = c.send(t, conv, "edit e", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	before := c.wsTree(t, c.s.AccessToken)
	code, ext := c.resolveRollback(t, c.s.AccessToken, conflictAp, "ROLLBACK")
	require.Equal(t, "CONFLICT", code)
	require.Equal(t, "e.txt", ext["path"])
	require.Equal(t, before, c.wsTree(t, c.s.AccessToken), "nothing changed")
	require.Equal(t, conflictAp, c.rollbackApproval(t, conflictRun), "still pending")

	// CONTINUE re-opens the run, which then finishes; its snapshot is committed then.
	code, _ = c.resolveRollback(t, c.s.AccessToken, conflictAp, "CONTINUE")
	require.Empty(t, code)
	r = c.waitRun(t, conflictRun, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	evs = c.eventsOf(t, conflictRun)
	require.Equal(t, 1, countType(evs, "execution.resumed"))
	require.Equal(t, 1, countType(evs, "state.committed"))

	// Diffs between versions: b.txt went b2 -> B2 (version 2) and back (version 3).
	var fd struct{ FileDiff string }
	c.Do(t, c.s.AccessToken, `{ fileDiff(path: "b.txt", fromVersion: 1, toVersion: 2) }`, nil).Decode(t, &fd)
	require.Equal(t, "--- a/b.txt@1\n+++ b/b.txt@2\n@@ -1,3 +1,3 @@\n b1\n-b2\n+B2\n b3\n", fd.FileDiff)
	var ws struct {
		Workspace struct {
			ProjectID string
			File      struct {
				Versions []struct {
					Version int
					Deleted bool
					RunID   *string
				}
			}
			Snapshots []struct {
				ID        string
				State     string
				Committed bool
				Run       *struct{ ID string }
			}
		}
	}
	c.Do(t, c.s.AccessToken, `{ workspace { projectId file(path: "c.txt") { versions { version deleted runId } }
		snapshots { id state committed run { id } } } }`, nil).Decode(t, &ws)
	// c.txt: created by the seed run, deleted by the failed run, re-created by the rollback.
	vs := ws.Workspace.File.Versions
	require.Len(t, vs, 3)
	require.Equal(t, []bool{false, true, false}, []bool{vs[0].Deleted, vs[1].Deleted, vs[2].Deleted})
	require.NotNil(t, vs[0].RunID)
	require.NotNil(t, vs[1].RunID)
	require.Nil(t, vs[2].RunID, "the rollback is the user's, not a run's")
	states := map[string]int{}
	for _, sn := range ws.Workspace.Snapshots {
		states[sn.State]++
		require.NotNil(t, sn.Run)
		require.Equal(t, sn.State != "open", sn.Committed)
	}
	require.Equal(t, map[string]int{"committed": 3, "rolled_back": 1, "kept": 1}, states)

	// Another tenant sees none of it: files, snapshots, diffs and the question are NOT_FOUND.
	other := c.SignUp(t, "", "Other")
	pid := ws.Workspace.ProjectID
	snap := ws.Workspace.Snapshots[0].ID
	for _, op := range []struct {
		q    string
		vars map[string]any
	}{
		{`query($p: ID) { workspace(projectId: $p) { files { path } } }`, map[string]any{"p": pid}},
		{`query($p: ID) { fileDiff(projectId: $p, path: "b.txt", fromVersion: 1, toVersion: 2) }`, map[string]any{"p": pid}},
		{`query($s: ID!) { snapshotDiff(from: $s, to: $s) }`, map[string]any{"s": snap}},
		{`mutation($s: ID!) { restoreSnapshot(id: $s) { id } }`, map[string]any{"s": snap}},
		{`mutation($p: ID) { createSnapshot(projectId: $p) { id } }`, map[string]any{"p": pid}},
		{`mutation($a: ID!) { resolveRollback(approvalId: $a, choice: KEEP) { id } }`, map[string]any{"a": ap}},
	} {
		res := c.Do(t, other.AccessToken, op.q, op.vars)
		require.Equal(t, "NOT_FOUND", res.Code(), "%s: %s", op.q, res.Body)
	}
	requireNodeNull(t, c.Do(t, other.AccessToken, `query($s: ID!) { node(id: $s) { id } }`, map[string]any{"s": snap}), "node(another tenant's snapshot)")
	require.Empty(t, c.wsTree(t, other.AccessToken), "the other tenant's own workspace is empty")
}

func TestWorkspaceSnapshotCreateRestoreDiff(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	conv := c.conversation(t, nil)
	q.push(wsWrite("s1", "x.txt", "one\ntwo\n"), wsWrite("s2", "y.txt", "y\n"), llmtest.Stream(llmtest.Text("ok")))
	s, _ := c.send(t, conv, "seed", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	first := c.wsTree(t, c.s.AccessToken)

	var cs struct {
		CreateSnapshot struct{ ID, Kind, State string }
	}
	c.Do(t, c.s.AccessToken, `mutation { createSnapshot(label: "v1") { id kind state } }`, nil).Decode(t, &cs)
	require.Equal(t, "manual", cs.CreateSnapshot.Kind)

	q.push(wsEdit("e1", "x.txt", "two", "TWO"), wsDelete("d1", "y.txt"), wsWrite("w1", "z.txt", "z"), llmtest.Stream(llmtest.Text("ok")))
	s, _ = c.send(t, conv, "change", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	second := c.wsTree(t, c.s.AccessToken)
	var cs2 struct{ CreateSnapshot struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { createSnapshot(label: "v2") { id } }`, nil).Decode(t, &cs2)

	var d struct{ SnapshotDiff string }
	c.Do(t, c.s.AccessToken, `query($a: ID!, $b: ID!) { snapshotDiff(from: $a, to: $b) }`,
		map[string]any{"a": cs.CreateSnapshot.ID, "b": cs2.CreateSnapshot.ID}).Decode(t, &d)
	require.Equal(t, "--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"+
		"--- a/y.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n"+
		"--- /dev/null\n+++ b/z.txt\n@@ -0,0 +1 @@\n+z\n\\ No newline at end of file\n", d.SnapshotDiff)

	// Restoring v1 gives back the first tree; the restore is undoable through the snapshot it
	// returns.
	var rs struct{ RestoreSnapshot struct{ ID, Kind string } }
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { restoreSnapshot(id: $id) { id kind } }`, map[string]any{"id": cs.CreateSnapshot.ID}).Decode(t, &rs)
	require.Equal(t, "restore", rs.RestoreSnapshot.Kind)
	require.Equal(t, first, c.wsTree(t, c.s.AccessToken))
	c.Do(t, c.s.AccessToken, `mutation($id: ID!) { restoreSnapshot(id: $id) { id } }`, map[string]any{"id": rs.RestoreSnapshot.ID}).Decode(t, &rs)
	require.Equal(t, second, c.wsTree(t, c.s.AccessToken))
}

// CONTINUE re-opens the ended run as if it had never ended (status QUEUED then RUNNING, no
// finishedAt, error or terminationReason), and the run goes on where it stopped, makes more
// changes and completes; the rollback question's events come before the first terminal event,
// the second end commits the run's snapshot before the second terminal event, and a
// subscription resumed at the first terminal event follows the re-opened run to its end.
func TestWorkspaceContinueResumesAndCompletes(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	conv := c.conversation(t, nil)

	q.push(wsWrite("w1", "a.txt", "one\n"), llmtest.Error(401, "invalid x-api-key"))
	s, _ := c.send(t, conv, "write a then b", nil)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "FAILED", r.Status)
	evs := c.eventsOf(t, s.RunID)
	types := eventTypes(evs)
	last := evs[len(evs)-1]
	require.Equal(t, "execution.failed", last.Type, "the terminal event is last: %v", types)
	require.Less(t, slices.Index(types, "state.snapshot_created"), slices.Index(types, "approval.requested"))
	require.Less(t, slices.Index(types, "approval.requested"), slices.Index(types, "execution.failed"), "the question comes before the terminal event")
	ap := c.rollbackApproval(t, s.RunID)

	// A subscriber that saw the end resumes at the terminal event; it has nothing to read until
	// the run is continued, then follows it to its new end.
	sub := c.SubscribeRun(t, c.s.AccessToken, s.RunID, last.Seq)

	q.push(wsWrite("w2", "b.txt", "two\n"), llmtest.Stream(llmtest.Text("both written")))
	code, _ := c.resolveRollback(t, c.s.AccessToken, ap, "CONTINUE")
	require.Empty(t, code)
	var mid struct {
		Run struct {
			Status            string
			FinishedAt        *string
			Error             *string
			TerminationReason *string
		}
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { status finishedAt error terminationReason } }`, map[string]any{"id": s.RunID}).Decode(t, &mid)
	require.Contains(t, []string{"QUEUED", "RUNNING", "COMPLETED"}, mid.Run.Status)
	if mid.Run.Status != "COMPLETED" {
		require.Nil(t, mid.Run.FinishedAt, "a re-opened run has not finished")
		require.Nil(t, mid.Run.Error)
		require.Nil(t, mid.Run.TerminationReason)
	}

	r = c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.Nil(t, r.Error, "the first end's error is gone")
	require.Equal(t, "completed", deref(r.TerminationReason))
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { status finishedAt error terminationReason } }`, map[string]any{"id": s.RunID}).Decode(t, &mid)
	require.NotNil(t, mid.Run.FinishedAt)
	tree := c.wsTree(t, c.s.AccessToken)
	require.Len(t, tree, 2, "the continued run went on: %v", tree)

	evs = c.eventsOf(t, s.RunID)
	types = eventTypes(evs)
	require.Equal(t, "execution.completed", types[len(types)-1], "%v", types)
	after := types[slices.Index(types, "execution.failed")+1:]
	require.Equal(t, []string{"approval.resolved", "execution.resumed", "execution.started"}, after[:3], "%v", types)
	require.Less(t, slices.Index(types, "state.committed"), len(types)-1, "state.committed comes before the terminal event")
	require.Equal(t, 1, countType(evs, "state.snapshot_created"), "the run keeps its one snapshot")
	require.Zero(t, countType(evs, "state.rolled_back")+countType(evs, "state.kept"))

	got := apptest.Durable(t, sub.Collect(15*time.Second, nil), last.Seq)
	require.Equal(t, types[len(types)-len(got):], eventTypes(got), "the resumed subscription streams the re-opened run to its end")
	// A replay from the start reads through the first end to the last.
	all := apptest.Durable(t, c.SubscribeRun(t, c.s.AccessToken, s.RunID, 0).Collect(15*time.Second, nil), 0)
	require.Equal(t, types, eventTypes(all))

	code, _ = c.resolveRollback(t, c.s.AccessToken, ap, "CONTINUE")
	require.Equal(t, "CONFLICT", code, "decided once")
}

// CONTINUE while the conversation is busy with a newer run queues the continued run behind it;
// it starts when that run ends.
func TestWorkspaceContinueWaitsForBusyConversation(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	release := make(chan struct{})
	var n atomic.Int32
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		switch n.Add(1) {
		case 1:
			return wsWrite("w1", "a.txt", "one\n")
		case 2:
			return llmtest.Error(401, "invalid x-api-key")
		case 3: // the newer run holds the conversation until released
			select {
			case <-release:
			case <-time.After(15 * time.Second):
			}
			return llmtest.Stream(llmtest.Text("newer done"))
		}
		return llmtest.Stream(llmtest.Text("continued and done"))
	})
	conv := c.conversation(t, nil)
	s, _ := c.send(t, conv, "first", nil)
	require.Equal(t, "FAILED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	ap := c.rollbackApproval(t, s.RunID)
	newer, _ := c.send(t, conv, "second", nil)
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 10*time.Second, 10*time.Millisecond)

	code, _ := c.resolveRollback(t, c.s.AccessToken, ap, "CONTINUE")
	require.Empty(t, code)
	require.Equal(t, "QUEUED", c.run(t, s.RunID).Status, "waits behind the active run")
	require.Equal(t, 1, c.count(t, `SELECT count(*) FROM runs WHERE id = $1 AND job_id IS NULL`, approvalUUID(t, "Run", s.RunID)),
		"without a job: no worker can take it before the active run ends")
	close(release)
	require.Equal(t, "COMPLETED", c.waitRun(t, newer.RunID, 15*time.Second).Status)
	r := c.waitRun(t, s.RunID, 15*time.Second)
	require.Equal(t, "COMPLETED", r.Status, "%v", deref(r.Error))
	require.Equal(t, int32(4), n.Load())
}

// Every bad input to the workspace API is refused with a code, and changes nothing: no file,
// version, snapshot or approval differs afterwards.
func TestWorkspaceBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	conv := c.conversation(t, nil)
	q.push(wsWrite("s1", "x.txt", "one\n"), wsEdit("s2", "x.txt", "one", "two"), llmtest.Stream(llmtest.Text("ok")))
	s, _ := c.send(t, conv, "seed", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	var cs struct{ CreateSnapshot struct{ ID string } }
	c.Do(t, c.s.AccessToken, `mutation { createSnapshot(label: "ok") { id } }`, nil).Decode(t, &cs)
	snap := cs.CreateSnapshot.ID
	// A run waiting on a tool-call approval (not a rollback question).
	c.settings(t, map[string]any{"autoExecute": false})
	q.push(wsWrite("w1", "y.txt", "why\n"))
	s, _ = c.send(t, conv, "needs approval", nil)
	require.Eventually(t, func() bool { return c.run(t, s.RunID).Status == "AWAITING_APPROVAL" }, 15*time.Second, 20*time.Millisecond)
	var ap struct {
		Run struct{ Approvals []struct{ ID, Kind string } }
	}
	c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { approvals { id kind } } }`, map[string]any{"id": s.RunID}).Decode(t, &ap)
	require.Len(t, ap.Run.Approvals, 1)
	toolApproval := ap.Run.Approvals[0].ID

	state := func() string {
		var out struct {
			Workspace struct {
				Files []struct {
					Path     string
					Version  int
					Versions []struct {
						Version int
						Sha256  *string
					}
				}
				Snapshots []struct{ ID, State string }
			}
		}
		c.Do(t, c.s.AccessToken, `{ workspace { files { path version versions { version sha256 } } snapshots { id state } } }`, nil).Decode(t, &out)
		var ap struct {
			Run struct {
				Status    string
				Approvals []struct{ ID, Status string }
			}
		}
		c.Do(t, c.s.AccessToken, `query($id: ID!) { run(id: $id) { status approvals { id status } } }`, map[string]any{"id": s.RunID}).Decode(t, &ap)
		b, _ := json.Marshal([]any{out, ap, c.wsTree(t, c.s.AccessToken)})
		return string(b)
	}
	before := state()
	missingSnap := model.EncodeID("Snapshot", uuid.New())
	for _, tc := range []struct {
		code, q string
		vars    map[string]any
	}{
		{"BAD_USER_INPUT", `{ fileDiff(path: "../etc/passwd", fromVersion: 1, toVersion: 2) }`, nil},
		{"BAD_USER_INPUT", `{ fileDiff(path: "", fromVersion: 1, toVersion: 2) }`, nil},
		{"BAD_USER_INPUT", `{ fileDiff(path: "a\u0000b", fromVersion: 1, toVersion: 2) }`, nil},
		{"BAD_USER_INPUT", `{ fileDiff(path: "x.txt", fromVersion: 0, toVersion: 2) }`, nil},
		{"BAD_USER_INPUT", `{ fileDiff(path: "x.txt", fromVersion: 1, toVersion: -1) }`, nil},
		{"BAD_USER_INPUT", `query($v: Int!) { fileDiff(path: "x.txt", fromVersion: 1, toVersion: $v) }`, map[string]any{"v": 4294967298}},
		{"NOT_FOUND", `{ fileDiff(path: "x.txt", fromVersion: 1, toVersion: 99) }`, nil},
		{"NOT_FOUND", `{ fileDiff(path: "nope.txt", fromVersion: 1, toVersion: 2) }`, nil},
		{"NOT_FOUND", `{ fileDiff(projectId: "garbage", path: "x.txt", fromVersion: 1, toVersion: 2) }`, nil},
		{"NOT_FOUND", `{ workspace(projectId: "garbage") { projectId } }`, nil},
		{"BAD_USER_INPUT", `{ workspace { file(path: "/etc/passwd") { content } } }`, nil},
		{"BAD_USER_INPUT", `{ workspace { file(path: "a\\b") { content } } }`, nil},
		{"NOT_FOUND", `query($s: ID!) { snapshotDiff(from: "garbage", to: $s) }`, map[string]any{"s": snap}},
		{"NOT_FOUND", `query($s: ID!, $m: ID!) { snapshotDiff(from: $s, to: $m) }`, map[string]any{"s": snap, "m": missingSnap}},
		{"NOT_FOUND", `query($s: ID!, $r: ID!) { snapshotDiff(from: $s, to: $r) }`, map[string]any{"s": snap, "r": s.RunID}},
		{"BAD_USER_INPUT", `mutation($l: String) { createSnapshot(label: $l) { id } }`, map[string]any{"l": strings.Repeat("é", 201)}},
		{"BAD_USER_INPUT", `mutation($l: String) { createSnapshot(label: $l) { id } }`, map[string]any{"l": "a\x00b"}},
		{"BAD_USER_INPUT", `mutation($l: String) { createSnapshot(label: $l) { id } }`, map[string]any{"l": "line\nbreak"}},
		{"NOT_FOUND", `mutation { createSnapshot(projectId: "garbage") { id } }`, nil},
		{"NOT_FOUND", `mutation { restoreSnapshot(id: "garbage") { id } }`, nil},
		{"NOT_FOUND", `mutation($m: ID!) { restoreSnapshot(id: $m) { id } }`, map[string]any{"m": missingSnap}},
		{"NOT_FOUND", `mutation { resolveRollback(approvalId: "garbage", choice: KEEP) { id } }`, nil},
		{"BAD_USER_INPUT", `mutation($a: ID!) { resolveRollback(approvalId: $a, choice: ROLLBACK) { id } }`, map[string]any{"a": toolApproval}},
		{"BAD_USER_INPUT", `mutation($a: ID!) { resolveRollback(approvalId: $a, choice: CONTINUE) { id } }`, map[string]any{"a": toolApproval}},
		{"GRAPHQL_VALIDATION_FAILED", `mutation($a: ID!) { resolveRollback(approvalId: $a, choice: MAYBE) { id } }`, map[string]any{"a": toolApproval}},
		{"GRAPHQL_VALIDATION_FAILED", `mutation($a: ID!, $c: RollbackChoice!) { resolveRollback(approvalId: $a, choice: $c) { id } }`, map[string]any{"a": toolApproval, "c": "MAYBE"}},
	} {
		res := c.Do(t, c.s.AccessToken, tc.q, tc.vars)
		require.Equal(t, tc.code, res.Code(), "%s %v: %s", tc.q, tc.vars, res.Body)
	}
	require.Equal(t, before, state(), "a refused request changed something")

	// A viewer reads but cannot snapshot, restore or decide.
	_, viewer := sessCreateKey(t, c.Env, c.s.AccessToken, "viewer", "VIEWER")
	for _, q := range []string{`mutation { createSnapshot { id } }`, `mutation($s: ID!) { restoreSnapshot(id: $s) { id } }`} {
		res := c.Do(t, viewer, q, map[string]any{"s": snap})
		require.Equal(t, "FORBIDDEN", res.Code(), "%s: %s", q, res.Body)
	}
	require.Equal(t, before, state())
}

// The retention job keeps what a pending rollback question needs, however old: a failed run's
// changes still roll back byte for byte after everything else of its age was pruned.
func TestWorkspaceRetentionKeepsPendingRollback(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	conv := c.conversation(t, nil)
	q.push(wsWrite("s1", "a.txt", "a0\n"), wsWrite("s2", "b.txt", "b0\n"), llmtest.Stream(llmtest.Text("seeded")))
	s, _ := c.send(t, conv, "seed", nil)
	require.Equal(t, "COMPLETED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	seeded := c.wsTree(t, c.s.AccessToken)
	q.push(wsEdit("e1", "a.txt", "a0", "a1"), wsDelete("d1", "b.txt"), wsWrite("w1", "c.txt", "c\n"), llmtest.Error(401, "invalid x-api-key"))
	s, _ = c.send(t, conv, "change", nil)
	require.Equal(t, "FAILED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	ap := c.rollbackApproval(t, s.RunID)

	// Everything is 40 days old; the job keeps 30 days.
	snapshots := c.count(t, `SELECT count(*) FROM workspace_snapshots`)
	versions := c.count(t, `SELECT count(*) FROM workspace_file_versions`)
	conn, err := pgx.Connect(context.Background(), c.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(context.Background())
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), `SELECT set_config('app.system', 'on', true)`)
	require.NoError(t, err)
	for _, table := range []string{"workspace_file_versions", "workspace_snapshots", "workspace_journal"} {
		_, err := tx.Exec(context.Background(), `UPDATE `+table+` SET created_at = created_at - interval '40 days'`)
		require.NoError(t, err)
	}
	_, err = tx.Exec(context.Background(), `UPDATE workspace_blobs SET used_at = used_at - interval '40 days'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(context.Background()))
	// The workers' retention job may prune first (it also runs once at start, which a slow
	// machine can delay past the update above): count what is left, not what Prune removed.
	stats, err := c.App.Workspace.Prune(context.Background(), time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.Less(t, c.count(t, `SELECT count(*) FROM workspace_snapshots`), snapshots, "the seed run's snapshot is pruned: %+v", stats)
	require.Less(t, c.count(t, `SELECT count(*) FROM workspace_file_versions`), versions, "%+v", stats)

	code, _ := c.resolveRollback(t, c.s.AccessToken, ap, "ROLLBACK")
	require.Empty(t, code)
	require.Equal(t, seeded, c.wsTree(t, c.s.AccessToken), "byte-identical after pruning and rolling back")

	// The workers run the retention job periodically, and once at start.
	require.Eventually(t, func() bool {
		return len(c.Jobs(t, "workspace_prune", rivertype.JobStateCompleted)) > 0
	}, 20*time.Second, 100*time.Millisecond, "the retention job did not run")
}

// An expired rollback question is a decision to keep: the approval is EXPIRED, the run's
// snapshot is closed as kept, approval.resolved and state.kept (reason expired) follow the
// run's terminal event, a late answer is CONFLICT, and retention prunes the run's history.
func TestWorkspaceRollbackQuestionExpiresAsKeep(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.settings(t, map[string]any{"autoExecute": true, "approvalThreshold": 100})
	var q replyQueue
	q.install(c.llm)
	conv := c.conversation(t, nil)
	q.push(wsWrite("w1", "a.txt", "the run's\n"), llmtest.Error(401, "invalid x-api-key"))
	s, _ := c.send(t, conv, "change and fail", nil)
	require.Equal(t, "FAILED", c.waitRun(t, s.RunID, 15*time.Second).Status)
	ap := c.rollbackApproval(t, s.RunID)
	changed := c.wsTree(t, c.s.AccessToken)
	runID := approvalUUID(t, "Run", s.RunID)
	snapshotState := func() string {
		var st string
		c.ownerTx(t, func(tx pgx.Tx) {
			require.NoError(t, tx.QueryRow(context.Background(), `SELECT state FROM workspace_snapshots WHERE run_id = $1`, runID).Scan(&st))
		})
		return st
	}
	require.Equal(t, "open", snapshotState())

	// A day later nobody has answered: the expiry sweep decides.
	c.App.Approvals.SetClock(func() time.Time { return time.Now().Add(approval.DefaultTTL + time.Hour) })
	_, err := c.App.Approvals.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, "kept", snapshotState(), "the snapshot is closed")
	require.Equal(t, changed, c.wsTree(t, c.s.AccessToken), "the changes are kept")
	evs := c.eventsOf(t, s.RunID)
	var tail []string
	terminal := -1
	for i, e := range evs {
		if e.Type == "execution.failed" {
			terminal = i
		}
	}
	require.GreaterOrEqual(t, terminal, 0)
	for _, e := range evs[terminal+1:] {
		tail = append(tail, e.Type)
	}
	require.Equal(t, []string{"approval.resolved", "state.kept"}, tail, "the decision follows the terminal event")
	var resolved, kept struct{ ApprovalID, SnapshotID, Status, Reason string }
	require.NoError(t, json.Unmarshal(evs[terminal+1].Data, &resolved))
	require.NoError(t, json.Unmarshal(evs[terminal+2].Data, &kept))
	require.Equal(t, "EXPIRED", resolved.Status)
	require.Equal(t, ap, resolved.ApprovalID)
	require.Equal(t, "expired", kept.Reason)
	require.Equal(t, ap, kept.ApprovalID)
	require.NotEmpty(t, kept.SnapshotID)

	// A late answer changes nothing.
	code, ext := c.resolveRollback(t, c.s.AccessToken, ap, "ROLLBACK")
	require.Equal(t, "CONFLICT", code)
	require.Equal(t, "EXPIRED", ext["status"])
	require.Equal(t, changed, c.wsTree(t, c.s.AccessToken))

	// Retention may prune the run's history now that the question is closed.
	c.ownerTx(t, func(tx pgx.Tx) {
		for _, table := range []string{"workspace_file_versions", "workspace_snapshots", "workspace_journal"} {
			_, err := tx.Exec(context.Background(), `UPDATE `+table+` SET created_at = created_at - interval '40 days'`)
			require.NoError(t, err)
		}
	})
	_, err = c.App.Workspace.Prune(context.Background(), time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_snapshots WHERE run_id = $1`, runID), "the run's snapshot is pruned")
	require.Zero(t, c.count(t, `SELECT count(*) FROM workspace_journal WHERE run_id = $1`, runID))
}
