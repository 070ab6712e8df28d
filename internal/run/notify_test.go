package run

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Insert notifications go out at most once per queue per FetchCooldown, as River's client paces
// its own.
func TestNotifyLimiter(t *testing.T) {
	var l notifyLimiter
	at := time.Now()
	require.True(t, l.due(QueueChat, at))
	require.False(t, l.due(QueueChat, at.Add(FetchCooldown-time.Millisecond)))
	require.True(t, l.due("default", at.Add(time.Millisecond)), "each queue has its own pace")
	require.True(t, l.due(QueueChat, at.Add(FetchCooldown)))
}
