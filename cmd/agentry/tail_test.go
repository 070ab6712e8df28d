package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// tailing is `agentry tail` running in a goroutine.
type tailing struct {
	out    *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

func startTail(t *testing.T, env *apptest.Env, token, runID string, extra ...string) *tailing {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tl := &tailing{out: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	args := append([]string{"tail", "--run", runID, "--url", env.Server.URL, "--token", token}, extra...)
	go func() { tl.done <- run(ctx, args, getenv(nil), tl.out, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-tl.done; err != nil {
			t.Logf("tail ended: %v", err)
		}
	})
	return tl
}

func (tl *tailing) waitFor(t *testing.T, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(tl.out.String(), s) }, 30*time.Second, 20*time.Millisecond,
		"tail never printed %q:\n%s", s, tl.out)
}

func (tl *tailing) exit(t *testing.T) error {
	t.Helper()
	select {
	case err := <-tl.done:
		tl.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("tail did not return:\n%s", tl.out)
		return nil
	}
}

func sendTo(t *testing.T, env *apptest.Env, token, content string) (runID string) {
	t.Helper()
	var conv struct{ CreateConversation struct{ ID string } }
	env.Do(t, token, `mutation { createConversation(input: {title: "tail"}) { id } }`, nil).Decode(t, &conv)
	var sent struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	env.Do(t, token, `mutation($c: ID!, $m: String!) { sendMessage(input: {conversationId: $c, content: $m}) { run { id } } }`,
		map[string]any{"c": conv.CreateConversation.ID, "m": content}).Decode(t, &sent)
	return sent.SendMessage.Run.ID
}

// TestTailHelpHintsAndInterrupt: `agentry tail --help` prints its usage and exits 0; a run that
// stays QUEUED gets the hint that no worker may run; Ctrl-C ends tail quietly.
func TestTailHelpHintsAndInterrupt(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"tail", "--help"}, getenv(nil), &out, io.Discard))
	require.Contains(t, out.String(), "usage: agentry tail --run RUN_ID")
	require.Error(t, run(context.Background(), []string{"tail"}, getenv(nil), io.Discard, io.Discard), "no run")

	env := apptest.Start(t, apptest.Options{NoWork: true}) // nobody works the run
	s := env.SignUp(t, "", "")
	runID := sendTo(t, env, s.AccessToken, "hello")
	tl := startTail(t, env, s.AccessToken, runID, "--queued-hint", "200ms")
	tl.waitFor(t, "hint: the run is still QUEUED after 200ms: is a worker running?")
	tl.cancel() // Ctrl-C
	require.NoError(t, tl.exit(t), "an interrupted tail exits quietly")
	require.Contains(t, tl.out.String(), "[1] task.queued")
}

// TestTailApprovalHint: when the run waits for an approval, tail prints the approval's id and
// the mutation that answers it; the id works as printed, and tail ends with the run.
func TestTailApprovalHint(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{}) // the demo model
	s := env.SignUp(t, "", "")
	runID := sendTo(t, env, s.AccessToken, "write notes.md: from tail")
	tl := startTail(t, env, s.AccessToken, runID)
	tl.waitFor(t, "resolveApproval(id: ")
	m := regexp.MustCompile(`resolveApproval\(id: "([^"]+)", decision: APPROVE\)`).FindStringSubmatch(tl.out.String())
	require.NotNil(t, m, "%s", tl.out)
	require.Contains(t, tl.out.String(), "hint: the run waits for approval "+m[1])
	res := env.Do(t, s.AccessToken, `mutation($id: ID!) { resolveApproval(id: $id, decision: APPROVE) { status } }`, map[string]any{"id": m[1]})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.NoError(t, tl.exit(t))
	require.Contains(t, tl.out.String(), "execution.completed")
	require.NotContains(t, tl.out.String(), "QUEUED after")
}

// TestTailPrintsASnapshotThenTheDeltas: tail joining a reply midway prints the snapshot's text,
// then the deltas continue it on the same line.
func TestTailPrintsASnapshotThenTheDeltas(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := &tailPrinter{w: &out}
	p.print(tailEvent{Seq: 2, Type: "execution.started", Data: []byte(`{}`)})
	p.print(tailEvent{Type: "message.snapshot", Data: []byte(`{"callIndex":0,"index":3,"text":"Hello, wor"}`)})
	p.print(tailEvent{Type: "message.delta", Data: []byte(`{"callIndex":0,"index":4,"text":"ld"}`)})
	p.print(tailEvent{Seq: 3, Type: "message.completed", Data: []byte(`{}`)})
	require.Equal(t, "[2] execution.started {}\nHello, world\n[3] message.completed {}\n", out.String())
}
