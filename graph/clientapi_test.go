package graph_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/llm/llmtest"
)

const inboxQuery = `query($s: ApprovalStatus, $n: Int, $a: String) { approvals(status: $s, first: $n, after: $a) {
	edges { cursor node { id status kind run { id } } } pageInfo { hasNextPage endCursor } } }`

type inboxPage struct {
	Approvals struct {
		Edges []struct {
			Node struct {
				ID, Status, Kind string
				Run              struct{ ID string }
			}
		}
		PageInfo struct {
			HasNextPage bool
			EndCursor   string
		}
	}
}

func (p inboxPage) ids() []string {
	var out []string
	for _, e := range p.Approvals.Edges {
		out = append(out, e.Node.ID)
	}
	return out
}

// TestApprovalsInbox: approvals(status: PENDING) lists the questions waiting for a person,
// newest first and paged: a member's (and an admin's) their own runs' and those of conversations
// shared with the team, another tenant's none.
func TestApprovalsInbox(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	owner := env.SignUp(t, "", "")
	_, first := parkForApproval(t, env, owner)
	_, second := parkForApproval(t, env, owner)

	var p inboxPage
	env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"s": "PENDING"}).Decode(t, &p)
	require.Equal(t, []string{second, first}, p.ids(), "newest first")
	env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"s": "PENDING", "n": 1}).Decode(t, &p)
	require.Equal(t, []string{second}, p.ids())
	require.True(t, p.Approvals.PageInfo.HasNextPage)
	env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"s": "PENDING", "n": 1, "a": p.Approvals.PageInfo.EndCursor}).Decode(t, &p)
	require.Equal(t, []string{first}, p.ids())
	require.False(t, p.Approvals.PageInfo.HasNextPage)

	// Decided, it leaves the inbox but stays in the list of every status.
	res := env.Do(t, owner.AccessToken, `mutation($id: ID!) { resolveApproval(id: $id, decision: REJECT) { status } }`, map[string]any{"id": first})
	require.Empty(t, res.Errors, "%s", res.Body)
	env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"s": "PENDING"}).Decode(t, &p)
	require.Equal(t, []string{second}, p.ids())
	env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"s": "REJECTED"}).Decode(t, &p)
	require.Equal(t, []string{first}, p.ids())
	env.Do(t, owner.AccessToken, inboxQuery, nil).Decode(t, &p)
	require.Equal(t, []string{second, first}, p.ids())

	// A member sees their own runs' questions; an admin everyone's; another tenant nobody's.
	colleague := env.SignUp(t, "", "")
	mine := memJoin(t, env, owner.AccessToken, colleague, owner.TenantID, "MEMBER")
	env.Do(t, mine.AccessToken, inboxQuery, map[string]any{"s": "PENDING"}).Decode(t, &p)
	require.Empty(t, p.ids(), "a member sees another member's questions")
	_, theirs := parkForApproval(t, env, apptest.Session{AccessToken: mine.AccessToken, TenantID: owner.TenantID})
	env.Do(t, mine.AccessToken, inboxQuery, map[string]any{"s": "PENDING"}).Decode(t, &p)
	require.Equal(t, []string{theirs}, p.ids())
	// An admin sees every run's record but no one's private questions.
	admin := memJoin(t, env, owner.AccessToken, env.SignUp(t, "", ""), owner.TenantID, "ADMIN")
	env.Do(t, admin.AccessToken, inboxQuery, map[string]any{"s": "PENDING"}).Decode(t, &p)
	require.Empty(t, p.ids())
	other := env.SignUp(t, "", "")
	env.Do(t, other.AccessToken, inboxQuery, nil).Decode(t, &p)
	require.Empty(t, p.ids())

	require.Equal(t, "BAD_USER_INPUT", env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"a": "garbage"}).Code())
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", env.Do(t, owner.AccessToken, inboxQuery, map[string]any{"s": "MAYBE"}).Code())
}

// TestMessagesLastBefore: messages(last:, before:) gives a chat its newest messages first and
// pages back from them with pageInfo.startCursor, in display order.
func TestMessagesLastBefore(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	var conv struct{ CreateConversation struct{ ID string } }
	env.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "paging"}) { id } }`, nil).Decode(t, &conv)
	for i := 1; i <= 5; i++ { // queued behind one another: one user message each
		res := env.Do(t, s.AccessToken, `mutation($c: ID!, $m: String!) { sendMessage(input: {conversationId: $c, content: $m}) { run { id } } }`,
			map[string]any{"c": conv.CreateConversation.ID, "m": fmt.Sprintf("message %d", i)})
		require.Empty(t, res.Errors, "%s", res.Body)
	}
	const q = `query($c: ID!, $f: Int, $a: String, $l: Int, $b: String) { conversation(id: $c) { messages(first: $f, after: $a, last: $l, before: $b) {
		edges { cursor node { content } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`
	type page struct {
		Contents                     []string
		HasNext, HasPrev             bool
		StartCursor, EndCursor, Code string
	}
	get := func(vars map[string]any) page {
		t.Helper()
		vars["c"] = conv.CreateConversation.ID
		res := env.Do(t, s.AccessToken, q, vars)
		if len(res.Errors) > 0 {
			return page{Code: res.Code()}
		}
		var out struct {
			Conversation struct {
				Messages struct {
					Edges []struct {
						Cursor string
						Node   struct{ Content string }
					}
					PageInfo struct {
						HasNextPage, HasPreviousPage bool
						StartCursor, EndCursor       *string
					}
				}
			}
		}
		res.Decode(t, &out)
		m := out.Conversation.Messages
		p := page{HasNext: m.PageInfo.HasNextPage, HasPrev: m.PageInfo.HasPreviousPage}
		for _, e := range m.Edges {
			p.Contents = append(p.Contents, e.Node.Content)
		}
		if len(m.Edges) > 0 {
			require.Equal(t, m.Edges[0].Cursor, *m.PageInfo.StartCursor)
			require.Equal(t, m.Edges[len(m.Edges)-1].Cursor, *m.PageInfo.EndCursor)
			p.StartCursor, p.EndCursor = *m.PageInfo.StartCursor, *m.PageInfo.EndCursor
		}
		return p
	}

	p := get(map[string]any{"l": 2})
	require.Equal(t, []string{"message 4", "message 5"}, p.Contents)
	require.True(t, p.HasPrev)
	require.False(t, p.HasNext)
	p = get(map[string]any{"l": 2, "b": p.StartCursor})
	require.Equal(t, []string{"message 2", "message 3"}, p.Contents)
	require.True(t, p.HasPrev)
	require.True(t, p.HasNext)
	p = get(map[string]any{"l": 2, "b": p.StartCursor})
	require.Equal(t, []string{"message 1"}, p.Contents)
	require.False(t, p.HasPrev)
	// Forward again from there: the cursors are the same kind.
	p = get(map[string]any{"f": 10, "a": p.EndCursor})
	require.Equal(t, []string{"message 2", "message 3", "message 4", "message 5"}, p.Contents)
	require.True(t, p.HasPrev)
	require.False(t, p.HasNext)

	require.Equal(t, "BAD_USER_INPUT", get(map[string]any{"f": 2, "l": 2}).Code)
	require.Equal(t, "BAD_USER_INPUT", get(map[string]any{"b": "garbage"}).Code)
	require.Equal(t, "BAD_USER_INPUT", get(map[string]any{"l": 101}).Code)

	// A backward page costs its size, as a forward one does.
	const pages = `{ conversations(first: 20) { edges { node { messages(%s: 100) { edges { node { content parts } } } } } } }`
	res := env.Do(t, s.AccessToken, fmt.Sprintf(pages, "last"), nil)
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", res.Code(), "%s", res.Body)
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", env.Do(t, s.AccessToken, fmt.Sprintf(pages, "first"), nil).Code())
}

// TestDeleteConversation: deleteConversation removes a conversation whose runs have ended (its
// owner or an admin may), keeps the usage its runs recorded, and is CONFLICT while a run has
// not ended.
func TestDeleteConversation(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t, "anthropic")
	release := make(chan struct{})
	c.llm.SetResponder(func(llmtest.Request) llmtest.Reply {
		<-release
		return llmtest.Stream(llmtest.Text("an answer"))
	})
	conv := c.conversation(t, nil)
	s, _ := c.send(t, conv, "hello", nil)
	const del = `mutation($id: ID!) { deleteConversation(id: $id) }`

	res := c.Do(t, c.s.AccessToken, del, map[string]any{"id": conv})
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
	require.Equal(t, s.RunID, res.Errors[0].Extensions["activeRunId"])
	close(release)
	c.waitRun(t, s.RunID, 20*time.Second)

	usage := func() string {
		t.Helper()
		res := c.Do(t, c.s.AccessToken, `query($f: Time!, $t: Time!) { usageSummary(from: $f, to: $t, groupBy: MODEL) { key calls inputTokens outputTokens costMicros } }`,
			map[string]any{"f": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "t": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		require.Empty(t, res.Errors, "%s", res.Body)
		return string(res.Data)
	}
	before := usage()
	require.Contains(t, before, `"calls":1`)

	// Another member does not see a private conversation, and may not delete a shared one;
	// another tenant finds nothing.
	colleague := memJoin(t, c.Env, c.s.AccessToken, c.SignUp(t, "", ""), c.s.TenantID, "MEMBER")
	require.Equal(t, "NOT_FOUND", c.Do(t, colleague.AccessToken, del, map[string]any{"id": conv}).Code())
	res = c.Do(t, c.s.AccessToken, `mutation($id: ID!) { setConversationVisibility(id: $id, visibility: TENANT) { id } }`, map[string]any{"id": conv})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, "FORBIDDEN", c.Do(t, colleague.AccessToken, del, map[string]any{"id": conv}).Code())
	require.Equal(t, "NOT_FOUND", c.Do(t, c.SignUp(t, "", "").AccessToken, del, map[string]any{"id": conv}).Code())

	var out struct{ DeleteConversation bool }
	c.Do(t, c.s.AccessToken, del, map[string]any{"id": conv}).Decode(t, &out)
	require.True(t, out.DeleteConversation)
	require.Equal(t, "NOT_FOUND", c.Do(t, c.s.AccessToken, `query($id: ID!) { conversation(id: $id) { id } }`, map[string]any{"id": conv}).Code())
	for _, id := range []string{conv, s.RunID, s.MessageID} {
		requireNodeNull(t, c.Do(t, c.s.AccessToken, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": id}), "node of a deleted conversation's object")
	}
	require.Equal(t, 0, c.count(t, `SELECT count(*) FROM runs`))
	require.Equal(t, before, usage(), "the usage of a deleted conversation's runs is kept")
	require.Equal(t, "NOT_FOUND", c.Do(t, c.s.AccessToken, del, map[string]any{"id": conv}).Code())
}
