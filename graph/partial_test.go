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
// are null: the answer is not nulled as a whole while messages were stored. The same holds for
// the operations' mutations: of two aliased createWebhook, the refused one is null with its own
// BAD_USER_INPUT and the other reports the webhook it stored.
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

	res = env.Do(t, s.AccessToken, `mutation {
		ok: createWebhook(input: {url: "https://example.com/hooks/agentry", events: ["execution.*"], secret: "0123456789abcdef0123456789abcdef"}) { id url }
		bad: createWebhook(input: {url: "ftp://example.com/hooks", events: ["execution.*"], secret: "0123456789abcdef0123456789abcdef"}) { id url }
	}`, nil)
	var hooks map[string]*struct{ ID, URL string }
	require.NoError(t, json.Unmarshal(res.Data, &hooks), "%s", res.Body)
	require.Len(t, hooks, 2, "both aliases answer: %s", res.Body)
	require.NotNil(t, hooks["ok"], "%s", res.Body)
	require.Equal(t, "https://example.com/hooks/agentry", hooks["ok"].URL)
	require.Nil(t, hooks["bad"], "%s", res.Body)
	require.Len(t, res.Errors, 1, "%s", res.Body)
	require.Equal(t, "BAD_USER_INPUT", res.Errors[0].Extensions["code"], "%s", res.Body)
	require.Equal(t, []any{"bad"}, res.Errors[0].Path, "%s", res.Body)
	var listed struct{ Webhooks []struct{ ID string } }
	env.Do(t, s.AccessToken, `{ webhooks { id } }`, nil).Decode(t, &listed)
	require.Len(t, listed.Webhooks, 1)
	require.Equal(t, hooks["ok"].ID, listed.Webhooks[0].ID)
}
