package graph_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/llm/llmtest"
)

// TestConcurrentInterrupts: 8 messages sent at once with ifBusy INTERRUPT while a run works are
// decided one after another under the conversation's lock: the working run and 7 of the 8 end
// CANCELLED, exactly one (the last decided) COMPLETES, and no two runs of the conversation are
// ever RUNNING at once (sampled from the database until every run has ended).
func TestConcurrentInterrupts(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		if strings.Contains(string(req.Raw), "long task") && !strings.Contains(string(req.Raw), "interrupt") {
			return llmtest.Stream(llmtest.Text("working"), llmtest.Delay(30*time.Second), llmtest.Text("never"))
		}
		// An answer takes a moment, so that runs started side by side would be seen RUNNING together.
		return llmtest.Stream(llmtest.Delay(500*time.Millisecond), llmtest.Text("answer"))
	})
	conv := c.conversation(t, nil)
	first, _ := c.send(t, conv, "long task", nil)
	require.Eventually(t, func() bool { return c.llm.Calls() == 1 }, 10*time.Second, 10*time.Millisecond)

	// Sample the conversation's RUNNING runs from a connection of the owner's.
	ctx := context.Background()
	conn := systemConn(t, c.OwnerURL)
	convID := approvalUUID(t, "Conversation", conv)
	sample := func() (running, unended int) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'RUNNING'),
			count(*) FILTER (WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')) FROM runs WHERE conversation_id = $1`, convID).Scan(&running, &unended))
		return running, unended
	}

	const n = 8
	var wg sync.WaitGroup
	ids := make([]string, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, res := c.send(t, conv, "interrupt "+string(rune('a'+i)), map[string]any{"ifBusy": "INTERRUPT"})
			if res != nil && len(res.Errors) > 0 {
				t.Errorf("send %d: %s", i, res.Body)
			}
			ids[i] = s.RunID
		}()
	}
	close(start)
	maxRunning := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for sent := false; ; {
		running, unended := sample()
		maxRunning = max(maxRunning, running)
		if !sent {
			select {
			case <-done:
				sent = true
			default:
			}
		} else if unended == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "runs still going after 60s")
		time.Sleep(2 * time.Millisecond) // a sampling interval, not a wait for a result
	}
	require.LessOrEqual(t, maxRunning, 1, "two runs of the conversation were RUNNING at once")

	statuses := map[string]int{}
	require.Equal(t, "CANCELLED", c.run(t, first.RunID).Status)
	for _, id := range ids {
		require.NotEmpty(t, id)
		statuses[c.run(t, id).Status]++
	}
	require.Equal(t, map[string]int{"COMPLETED": 1, "CANCELLED": n - 1}, statuses)
	require.True(t, c.llm.WaitDisconnects(1, 5*time.Second), "the interrupted run's model stream was not closed")
}
