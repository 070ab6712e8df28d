package graph_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/db/dbtest"
)

// statementCounter is a TCP proxy in front of Postgres that counts the statements its clients
// run: each simple query ('Q') and each execution of a prepared one ('E') of the wire protocol,
// leaving out the pool's liveness pings. Pointing a process's DATABASE_URL at it counts what the
// process asks of Postgres, whatever library or pool it uses.
type statementCounter struct {
	addr string
	n    atomic.Int64
}

func newStatementCounter(t *testing.T, upstream string) *statementCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &statementCounter{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = client.Close()
				continue
			}
			wg.Go(func() {
				_, _ = io.Copy(client, server)
				_ = client.Close()
			})
			wg.Go(func() {
				c.count(server, client)
				_ = server.Close()
			})
		}
	})
	return c
}

// count copies the client's messages to the server, counting statements. The first message
// (startup) has no type byte; every later one is a type byte and a length that counts itself.
func (c *statementCounter) count(server net.Conn, client net.Conn) {
	r := bufio.NewReader(client)
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if _, err := server.Write(hdr[:4]); err != nil {
		return
	}
	if _, err := io.CopyN(server, r, int64(n)-4); err != nil {
		return
	}
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch {
		case hdr[0] == 'E':
			c.n.Add(1)
		case hdr[0] == 'Q' && !strings.HasPrefix(string(body), "-- ping"):
			c.n.Add(1)
		}
		if _, err := server.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}

// The N+1 queries of a page: 50 messages with their runs, each run's conversation, task, tool
// calls and approvals, and each approval's run, cost the same statements as 5 messages do
// (the dataloaders batch each kind of object into one query): 28, where reading them one by one
// costs 616.
func TestLoadersPageCostsFixedStatements(t *testing.T) {
	t.Parallel()
	owner, err := url.Parse(dbtest.URL(t))
	require.NoError(t, err)
	counter := newStatementCounter(t, owner.Host)
	owner.Host = counter.addr
	e := apptest.Start(t, apptest.Options{NoWork: true, DatabaseURL: owner.String()})
	s := e.SignUp(t, "", "")
	var conv struct{ CreateConversation struct{ ID string } }
	e.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "page"}) { id } }`, nil).Decode(t, &conv)
	for i := range 50 {
		e.Do(t, s.AccessToken, `mutation($c: ID!, $m: String!) { sendMessage(input: {conversationId: $c, content: $m}) { run { id } } }`,
			map[string]any{"c": conv.CreateConversation.ID, "m": fmt.Sprintf("message %d", i)}).Decode(t, &struct{}{})
	}

	const page = `query($c: ID!, $n: Int) {
		viewer { tenant { name } }
		conversation(id: $c) { messages(first: $n) { edges { node { id run {
			id status conversation { id title } task { id } toolCalls { id name }
			approvals { id run { id } }
		} } } } }
	}`
	statements := func(n int) int64 {
		before := counter.n.Load()
		var out struct {
			Conversation struct {
				Messages struct {
					Edges []struct {
						Node struct {
							Run *struct {
								ID           string
								Conversation struct{ ID string }
							}
						}
					}
				}
			}
		}
		e.Do(t, s.AccessToken, page, map[string]any{"c": conv.CreateConversation.ID, "n": n}).Decode(t, &out)
		used := counter.n.Load() - before
		require.Len(t, out.Conversation.Messages.Edges, n)
		for _, edge := range out.Conversation.Messages.Edges {
			require.NotNil(t, edge.Node.Run, "each message has its run")
			require.Equal(t, conv.CreateConversation.ID, edge.Node.Run.Conversation.ID)
		}
		return used
	}
	// The loaders gather the keys asked within a short wait. On a busy machine a batch can be
	// split when a goroutine asks after the wait (one transaction more: 4 statements), so each
	// size takes its fewest of five, after a warm-up that opens the connections the request uses.
	statements(50)
	fewest := func(n int) int64 {
		return min(statements(n), statements(n), statements(n), statements(n), statements(n))
	}
	few, many := fewest(5), fewest(50)
	t.Logf("statements: %d for 5 messages, %d for 50", few, many)
	require.LessOrEqual(t, many, few+4, "a page of 50 costs what a page of 5 does (give or take a split batch)")
	require.Less(t, many, int64(50), "not a query per message")
}

// A page of runs with their sub-agents and their usage roll-ups (Run.subagents, Run.total*)
// costs the same statements for 40 runs as for 5: the sub-agents of every run of the page come
// in one query, and the roll-ups of every run in another.
func TestLoadersRunSubagentsAndTotals(t *testing.T) {
	t.Parallel()
	owner, err := url.Parse(dbtest.URL(t))
	require.NoError(t, err)
	counter := newStatementCounter(t, owner.Host)
	owner.Host = counter.addr
	e := apptest.Start(t, apptest.Options{NoWork: true, DatabaseURL: owner.String()})
	s := e.SignUp(t, "", "")
	for i := range 20 {
		var conv struct{ CreateConversation struct{ ID string } }
		e.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "page"}) { id } }`, nil).Decode(t, &conv)
		var sent struct {
			SendMessage struct{ Run struct{ ID string } }
		}
		e.Do(t, s.AccessToken, `mutation($c: ID!, $m: String!) { sendMessage(input: {conversationId: $c, content: $m}) { run { id } } }`,
			map[string]any{"c": conv.CreateConversation.ID, "m": fmt.Sprintf("message %d", i)}).Decode(t, &sent)
		res := e.Do(t, s.AccessToken, `mutation($in: SpawnSubagentInput!) { spawnSubagent(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"parentRunId": sent.SendMessage.Run.ID, "role": "GENERAL", "goal": "go"}})
		require.Empty(t, res.Errors, "%s", res.Body)
	}
	const page = `query($n: Int) { runs(first: $n) { edges { node {
		id kind subagents { id status } totalInputTokens totalOutputTokens totalCostMicros
	} } } }`
	statements := func(n int) int64 {
		before := counter.n.Load()
		var out struct {
			Runs struct {
				Edges []struct {
					Node struct {
						Kind      string
						Subagents []struct{ ID string }
					}
				}
			}
		}
		e.Do(t, s.AccessToken, page, map[string]any{"n": n}).Decode(t, &out)
		used := counter.n.Load() - before
		require.Len(t, out.Runs.Edges, n)
		for _, edge := range out.Runs.Edges {
			if edge.Node.Kind == "CHAT_TURN" {
				require.Len(t, edge.Node.Subagents, 1)
			}
		}
		return used
	}
	statements(40)
	fewest := func(n int) int64 {
		return min(statements(n), statements(n), statements(n), statements(n), statements(n))
	}
	few, many := fewest(5), fewest(40)
	t.Logf("statements: %d for 5 runs, %d for 40", few, many)
	require.LessOrEqual(t, many, few+4, "a page of 40 costs what a page of 5 does (give or take a split batch)")
	require.Less(t, many, int64(40), "not a query per run")
}
