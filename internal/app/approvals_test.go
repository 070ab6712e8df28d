package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/approval"
)

// TestApprovalMapping: every kind the executor asks is a kind the approval service knows, and
// every stored status reads as the executor's state of the same name.
func TestApprovalMapping(t *testing.T) {
	t.Parallel()
	for _, k := range []agent.ApprovalKind{agent.ApprovalToolCall, agent.ApprovalContinue, agent.ApprovalEscalation} {
		require.True(t, approval.ValidKind(kindOf(k)), k)
		require.Equal(t, string(k), kindOf(k))
	}
	for status, want := range map[approval.Status]agent.ApprovalState{
		approval.StatusPending: agent.ApprovalPending, approval.StatusApproved: agent.ApprovalApproved,
		approval.StatusRejected: agent.ApprovalRejected, approval.StatusExpired: agent.ApprovalExpired, "": agent.ApprovalNone,
	} {
		require.Equal(t, want, stateOf(status), status)
	}
}
