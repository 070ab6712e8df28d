package apptest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// serial is the lock Serial takes: held by one test of this process at a time (holder), and
// through an flock on a file of the temporary directory by one process of the suite.
var serial struct {
	mu     sync.Mutex
	free   *sync.Cond
	holder testing.TB
	file   *os.File
}

// Serial makes t the only test of the whole suite, across its test processes, that runs with
// it until t ends: for the tests that run several agentry processes or apps on one database
// (worker processes killed and replaced, two apps sharing a database), each holding 10-20 of
// the server's connections, so that the suite fits in a server of max_connections 50. The
// other tests go on meanwhile. Calling it again from the same test is a no-op.
func Serial(t testing.TB) {
	t.Helper()
	serial.mu.Lock()
	defer serial.mu.Unlock()
	if serial.free == nil {
		serial.free = sync.NewCond(&serial.mu)
	}
	if serial.holder == t {
		return
	}
	for serial.holder != nil {
		serial.free.Wait()
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "agentry-tests-serial.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	serial.holder, serial.file = t, f
	t.Cleanup(func() {
		serial.mu.Lock()
		defer serial.mu.Unlock()
		_ = syscall.Flock(int(serial.file.Fd()), syscall.LOCK_UN)
		_ = serial.file.Close()
		serial.holder, serial.file = nil, nil
		serial.free.Broadcast()
	})
}
