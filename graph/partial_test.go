package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// TestAliasedMutationsReportEachResult: six aliased sendMessage in one request, against a
// spending limit of 3 at once. The first three store their message and start their run and say
// so; the other three are RATE_LIMITED each under its own alias's path, and their fields alone
// are null: the answer is not nulled as a whole while messages were stored.
func TestAliasedMutationsReportEachResult(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_RATE_LIMIT_SPEND": "1/m burst 3"}})
	s := env.SignUp(t, "", "")
	var conv struct{ CreateConversation struct{ ID string } }
	env.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "aliases"}) { id } }`, nil).Decode(t, &conv)

	var q strings.Builder
	q.WriteString("mutation($c: ID!) {")
	for i := range 6 {
		fmt.Fprintf(&q, ` m%d: sendMessage(input: {conversationId: $c, content: "message %d"}) { message { id content } run { id status } }`, i, i)
	}
	q.WriteString(" }")
	res := env.Do(t, s.AccessToken, q.String(), map[string]any{"c": conv.CreateConversation.ID})

	var data map[string]*struct {
		Message struct{ ID, Content string }
		Run     struct{ ID, Status string }
	}
	require.NoError(t, json.Unmarshal(res.Data, &data), "%s", res.Body)
	require.Len(t, data, 6, "every alias answers: %s", res.Body)
	limited := map[string]bool{}
	for _, e := range res.Errors {
		require.Equal(t, "RATE_LIMITED", e.Extensions["code"], "%s", res.Body)
		require.Len(t, e.Path, 1)
		limited[e.Path[0].(string)] = true
	}
	var stored []string
	for i := range 6 {
		alias := fmt.Sprintf("m%d", i)
		if i < 3 {
			require.NotNil(t, data[alias], "%s: %s", alias, res.Body)
			require.Equal(t, fmt.Sprintf("message %d", i), data[alias].Message.Content)
			require.Equal(t, "QUEUED", data[alias].Run.Status)
			require.False(t, limited[alias])
			stored = append(stored, data[alias].Message.ID)
		} else {
			require.Nil(t, data[alias], "%s", alias)
			require.True(t, limited[alias], "%s has its own error: %s", alias, res.Body)
		}
	}

	// Exactly what the answer reported is stored.
	var msgs struct {
		Conversation struct {
			Messages struct {
				Edges []struct{ Node struct{ ID string } }
			}
		}
	}
	env.Do(t, s.AccessToken, `query($c: ID!) { conversation(id: $c) { messages(first: 50) { edges { node { id } } } } }`,
		map[string]any{"c": conv.CreateConversation.ID}).Decode(t, &msgs)
	var got []string
	for _, e := range msgs.Conversation.Messages.Edges {
		got = append(got, e.Node.ID)
	}
	require.Equal(t, stored, got)
}
