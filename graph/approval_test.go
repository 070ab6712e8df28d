package graph_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// approvalUUID returns the uuid inside a server-made global id of type typ.
func approvalUUID(t *testing.T, typ, id string) uuid.UUID {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err, "global id %q", id)
	k, v, ok := strings.Cut(string(raw), ":")
	require.True(t, ok && k == typ, "global id %q is not a %s", raw, typ)
	u, err := uuid.Parse(v)
	require.NoError(t, err)
	return u
}

// parkForApproval sends a message in s's tenant and, with no worker running, does what the
// executor does when a call needs a person: takes the run, stores a write_file call and asks.
// It returns the run's and the approval's global ids.
func parkForApproval(t *testing.T, env *apptest.Env, s apptest.Session) (runID, approvalID string) {
	t.Helper()
	var conv struct{ CreateConversation struct{ ID string } }
	env.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "approvals"}) { id } }`, nil).Decode(t, &conv)
	var sent struct {
		SendMessage struct{ Run struct{ ID string } }
	}
	env.Do(t, s.AccessToken, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, content: "write my notes"}) { run { id } } }`,
		map[string]any{"c": conv.CreateConversation.ID}).Decode(t, &sent)
	runID = sent.SendMessage.Run.ID

	ctx := context.Background()
	tenantID, rid := approvalUUID(t, "Tenant", s.TenantID), approvalUUID(t, "Run", runID)
	var r dbsqlc.Run
	require.NoError(t, env.App.DB.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		r, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: rid})
		return err
	}))
	require.NotNil(t, r.JobID)
	l, err := env.App.Runs.Acquire(ctx, tenantID, rid, "test-worker", *r.JobID)
	require.NoError(t, err)
	var a dbsqlc.Approval
	require.NoError(t, env.App.Runs.InFence(ctx, l, func(ctx context.Context, tx *db.Tx) error {
		c, err := tx.Q.ToolCallInsert(ctx, dbsqlc.ToolCallInsertParams{
			TenantID: tenantID, ID: uuid.Must(uuid.NewV7()), RunID: rid, MessageID: uuid.New(), CallID: "call_1", Turn: 1,
			Name: "write_file", Arguments: []byte(`{"path":"notes/todo.md","content":"buy milk"}`), Status: "PENDING", Risk: 40,
		})
		if err != nil {
			return err
		}
		a, err = env.App.Approvals.Request(ctx, tx, l, approval.Request{Kind: approval.KindToolCall, ToolCall: &c, Question: "Allow write_file?"})
		return err
	}))
	return runID, base64.RawURLEncoding.EncodeToString([]byte("Approval:" + a.ID.String()))
}

func TestResolveApprovalAPI(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	a := env.SignUp(t, "", "Tenant A")
	b := env.SignUp(t, "", "Tenant B")
	runID, approvalID := parkForApproval(t, env, a)

	// The run lists what it waits on.
	var before struct {
		Run struct {
			Status    string
			Approvals []struct {
				ID, Kind, Status string
				Question         *string
				ExpiresAt        string
				DecidedAt        *string
				ToolCall         *struct{ Name string }
				Run              struct{ ID string }
			}
		}
	}
	env.Do(t, a.AccessToken, `query($id: ID!) { run(id: $id) { status approvals {
		id kind status question expiresAt decidedAt toolCall { name } run { id } } } }`, map[string]any{"id": runID}).Decode(t, &before)
	require.Equal(t, "AWAITING_APPROVAL", before.Run.Status)
	require.Len(t, before.Run.Approvals, 1)
	got := before.Run.Approvals[0]
	require.Equal(t, approvalID, got.ID)
	require.Equal(t, "tool_call", got.Kind)
	require.Equal(t, "PENDING", got.Status)
	require.Equal(t, "Allow write_file?", *got.Question)
	require.NotEmpty(t, got.ExpiresAt)
	require.Nil(t, got.DecidedAt)
	require.Equal(t, "write_file", got.ToolCall.Name)
	require.Equal(t, runID, got.Run.ID)

	// Another tenant cannot see or decide it: NOT_FOUND, never FORBIDDEN.
	const resolve = `mutation($id: ID!, $d: ApprovalDecision!, $n: String) { resolveApproval(id: $id, decision: $d, note: $n) {
		id status note decidedAt run { status } } }`
	res := env.Do(t, b.AccessToken, resolve, map[string]any{"id": approvalID, "d": "APPROVE"})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	requireNodeNull(t, env.Do(t, b.AccessToken, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": approvalID}), "node(another tenant's approval)")
	// Nor does another type's id, or garbage, reach an approval.
	res = env.Do(t, a.AccessToken, resolve, map[string]any{"id": runID, "d": "APPROVE"})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
	res = env.Do(t, a.AccessToken, resolve, map[string]any{"id": "not-an-id", "d": "REJECT"})
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)

	var node struct{ Node struct{ Status string } }
	env.Do(t, a.AccessToken, `query($id: ID!) { node(id: $id) { ... on Approval { status } } }`, map[string]any{"id": approvalID}).Decode(t, &node)
	require.Equal(t, "PENDING", node.Node.Status, "tenant B's attempts changed nothing")

	var out struct {
		ResolveApproval struct {
			ID, Status string
			Note       *string
			DecidedAt  *string
			Run        struct{ Status string }
		}
	}
	env.Do(t, a.AccessToken, resolve, map[string]any{"id": approvalID, "d": "APPROVE", "n": "fine"}).Decode(t, &out)
	require.Equal(t, "APPROVED", out.ResolveApproval.Status)
	require.Equal(t, "fine", *out.ResolveApproval.Note)
	require.NotNil(t, out.ResolveApproval.DecidedAt)
	require.Equal(t, "QUEUED", out.ResolveApproval.Run.Status, "a continuation is enqueued")

	res = env.Do(t, a.AccessToken, resolve, map[string]any{"id": approvalID, "d": "REJECT"})
	require.Equal(t, "CONFLICT", res.Code(), "%s", res.Body)
}
