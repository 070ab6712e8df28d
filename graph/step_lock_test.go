package graph_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/llm/llmtest"
)

// TestControlDuringToolStep: a run's sequential tool step holds the run's row while its tools
// run, and stores the tool results at the conversation's next positions after them. A cancel
// and an interrupting sendMessage lock the conversation, then the run. Sent while a tool of
// the step waits (here on the project's row, which the test holds), each is answered without
// an error once the tool goes on, and the run ends CANCELLED.
func TestControlDuringToolStep(t *testing.T) {
	t.Parallel()
	for _, control := range []string{"cancelRun", "interrupt"} {
		t.Run(control, func(t *testing.T) {
			t.Parallel()
			c := newChatEnv(t, "anthropic")
			c.settings(t, map[string]any{"autoExecute": true})
			c.llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
				raw := string(req.Raw)
				switch {
				case strings.Contains(raw, "new question"):
					return llmtest.Stream(llmtest.Text("quick answer"))
				case strings.Contains(raw, "tool_use_id"):
					return llmtest.Stream(llmtest.Text("finished"))
				}
				return llmtest.Stream(llmtest.ToolCall("w1", "write_file", `{"path":"a.txt","content":"x"}`))
			})
			conv := c.conversation(t, nil)
			ctx := context.Background()
			conn := systemConn(t, c.OwnerURL)
			// Hold the project's row: write_file creating a file locks it (WorkspaceLock).
			hold, err := conn.Begin(ctx)
			require.NoError(t, err)
			_, err = hold.Exec(ctx, `SELECT 1 FROM projects WHERE id = (SELECT project_id FROM conversations WHERE id = $1) FOR NO KEY UPDATE`,
				approvalUUID(t, "Conversation", conv))
			require.NoError(t, err)
			first, _ := c.send(t, conv, "write it", nil)
			waiting := func(n int) func() bool {
				return func() bool {
					return c.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= n
				}
			}
			require.Eventually(t, waiting(1), 10*time.Second, 10*time.Millisecond, "the tool never waited on the project")
			type answer struct {
				body string
				errs int
				run  string
			}
			done := make(chan answer, 1)
			go func() {
				if control == "cancelRun" {
					res := c.Do(t, c.s.AccessToken, `mutation($id: ID!) { cancelRun(id: $id) { status } }`, map[string]any{"id": first.RunID})
					done <- answer{body: string(res.Body), errs: len(res.Errors)}
					return
				}
				s, res := c.send(t, conv, "new question", map[string]any{"ifBusy": "INTERRUPT"})
				done <- answer{body: string(res.Body), errs: len(res.Errors), run: s.RunID}
			}()
			require.Eventually(t, waiting(2), 10*time.Second, 10*time.Millisecond, "the control never waited on the run")
			require.NoError(t, hold.Rollback(ctx))
			a := <-done
			require.Zero(t, a.errs, "%s", a.body)
			if control == "interrupt" {
				require.Equal(t, "COMPLETED", c.waitRun(t, a.run, 15*time.Second).Status)
			}
			require.Equal(t, "CANCELLED", c.waitRun(t, first.RunID, 15*time.Second).Status)
		})
	}
}
