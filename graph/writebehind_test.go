package graph

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedConn records each write it is given; a write waits for the gate while it is closed.
type gatedConn struct {
	net.Conn
	started chan struct{} // receives once per write, as it begins
	gate    chan struct{} // a write proceeds once this is closed
	err     error         // what every write returns

	mu     sync.Mutex
	writes []string
	closed bool
}

func newGatedConn() *gatedConn {
	return &gatedConn{started: make(chan struct{}, 16), gate: make(chan struct{})}
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.started <- struct{}{}
	<-c.gate
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *gatedConn) SetWriteDeadline(time.Time) error { return nil }

func (c *gatedConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// Messages queued while a write is in progress go out together in the next write, in order,
// and Close writes what is queued before it closes the socket.
func TestWriteBehindBatchesWhileAWriteIsInProgress(t *testing.T) {
	c := newGatedConn()
	w := newWriteBehind(c)
	n, err := w.Write([]byte("first;"))
	require.NoError(t, err)
	require.Equal(t, 6, n)
	<-c.started // the flusher is writing "first;" and waits for the gate
	for _, m := range []string{"a;", "b;", "c;"} {
		_, err := w.Write([]byte(m))
		require.NoError(t, err)
	}
	close(c.gate)
	require.NoError(t, w.Close())
	require.Equal(t, []string{"first;", "a;b;c;"}, c.writes)
	require.True(t, c.closed)

	_, err = w.Write([]byte("late"))
	require.ErrorIs(t, err, net.ErrClosed)
	require.Equal(t, []string{"first;", "a;b;c;"}, c.writes, "nothing written after Close")
}

// A write that fails makes every later Write return its error, and what was queued behind it
// is dropped.
func TestWriteBehindReportsAFailedWrite(t *testing.T) {
	c := newGatedConn()
	boom := errors.New("connection reset")
	c.err = boom
	w := newWriteBehind(c)
	_, err := w.Write([]byte("lost"))
	require.NoError(t, err, "queued")
	<-c.started
	_, err = w.Write([]byte("behind it"))
	require.NoError(t, err, "queued behind the write in progress")
	close(c.gate)
	require.NoError(t, w.Close()) // waits for the flusher
	_, err = w.Write([]byte("after"))
	require.ErrorIs(t, err, boom)
	require.Empty(t, c.writes)
	require.Len(t, c.started, 0, "nothing written after the failure")
}

// Close does not wait for ever on a peer that does not read: it bounds the flush with a write
// deadline and closes the socket.
func TestWriteBehindCloseGivesUpOnAPeerThatDoesNotRead(t *testing.T) {
	ours, peer := net.Pipe()
	defer peer.Close()
	w := newWriteBehind(ours)
	w.closeWait = 50 * time.Millisecond
	_, err := w.Write([]byte("never read"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = w.Write([]byte("x"))
	require.Error(t, err)
	_, err = peer.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the socket is closed")
}

// A TCP socket closed with bytes still queued for a slow reader goes on writing them, as a
// socket closes with bytes in its kernel buffer, while reads on it end at once; the peer gets
// every byte and then the end of the stream.
func TestWriteBehindClosedSocketStillDeliversWhatWasQueued(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer peer.Close()
	server := <-accepted
	require.NoError(t, server.(*net.TCPConn).SetWriteBuffer(64<<10))
	require.NoError(t, peer.(*net.TCPConn).SetReadBuffer(64<<10))
	w := newWriteBehind(server)

	readEnded := make(chan error, 1)
	go func() {
		_, err := w.Read(make([]byte, 1))
		readEnded <- err
	}()
	var want []byte
	for i := range 32 { // 1 MiB, well past the socket buffers and the queue's limit
		chunk := make([]byte, 32<<10)
		for j := range chunk {
			chunk[j] = byte(i * j)
		}
		want = append(want, chunk...)
	}
	wrote, closed := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(closed)
		for off := 0; off < len(want); off += 32 << 10 {
			if _, err := w.Write(want[off : off+32<<10]); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- w.Close()
	}()
	// A slow reader (a pause after each 64 KiB), so that Close finds bytes queued, and slower
	// still once the socket is closed: what is left takes longer to read than the old bound of
	// Close's flush (250 ms).
	var got []byte
	buf := make([]byte, 64<<10)
	for next := 64 << 10; ; {
		n, err := peer.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		if len(got) >= next {
			next += 64 << 10
			pause := 5 * time.Millisecond
			select {
			case <-closed:
				pause = 100 * time.Millisecond
			default:
			}
			time.Sleep(pause)
		}
	}
	require.NoError(t, <-wrote)
	require.Equal(t, len(want), len(got))
	require.Equal(t, want, got)
	require.Error(t, <-readEnded, "the read ended when the socket was closed")
}

// Large writes arrive whole and in order, through as many flushes as it takes, including
// writes beyond the queue's limit, which wait for the flusher.
func TestWriteBehindKeepsOrderUnderBackpressure(t *testing.T) {
	ours, peer := net.Pipe()
	w := newWriteBehind(ours)
	var want []byte
	for i := range 40 {
		chunk := make([]byte, 32<<10)
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		want = append(want, chunk...)
	}
	done := make(chan error, 1)
	go func() {
		for off := 0; off < len(want); off += 32 << 10 {
			if _, err := w.Write(want[off : off+32<<10]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	got := make([]byte, len(want))
	_, err := io.ReadFull(peer, got)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, want, got)
	require.NoError(t, w.Close())
}

// Only a response writer that can be hijacked (itself or one it wraps) is given a written-behind
// socket; the others reach the WebSocket library as they are, which refuses them with 501.
func TestCanHijack(t *testing.T) {
	require.False(t, canHijack(httptest.NewRecorder()))
	require.False(t, canHijack(unwrapper{httptest.NewRecorder()}))
	require.True(t, canHijack(hijackable{httptest.NewRecorder()}))
	require.True(t, canHijack(unwrapper{hijackable{httptest.NewRecorder()}}))
}

type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

type hijackable struct{ http.ResponseWriter }

func (hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errors.New("no") }
