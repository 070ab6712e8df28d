package graph

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// A subscriber of a busy run gets a WebSocket message per event, and each message written on
// its own costs a system call on the way out and another on the peer's way in (on a loopback
// socket the write also runs the receiver's side of TCP): at 1k events/s to 100 subscribers
// that was a third of the process's CPU. The socket under an accepted WebSocket is therefore
// written behind: a message is queued and a flusher writes everything queued so far in one
// call. A message that finds the socket idle goes out at once (the flusher starts as it is
// queued); messages that arrive while a write is in progress go out together in the next one.
// Nothing waits for a batch to fill, so a lone event is not delayed, and the busier the
// socket, the fewer calls per message.

// writeBehindLimit is how much may be queued before Write waits for the flusher: a subscriber
// that does not read holds its writer back as an unqueued socket would, instead of growing the
// queue without bound. A socket holds at most about twice this (the queue, and the batch being
// written) plus one message.
const writeBehindLimit = 256 << 10

// writeBehindKeep is the largest buffer kept between flushes; larger ones (a burst's) are let go
// once written, so that an idle socket holds little.
const writeBehindKeep = 8 << 10

// writeBehindCloseWait bounds how long a closed socket goes on writing what was queued before
// it (the close frame that answers the peer's among it) to a peer that does not read: the time
// the WebSocket library itself gives a close frame.
const writeBehindCloseWait = 5 * time.Second

// writeBehind is a net.Conn whose writes are queued and written by a flusher goroutine, which
// runs only while there is something queued. Reads and the rest pass through.
type writeBehind struct {
	net.Conn

	mu       sync.Mutex
	changed  sync.Cond // the queue was taken by the flusher, or the flusher stopped
	queued   []byte
	spare    []byte // the last flushed buffer, for the next queue
	flushing bool
	closed   bool  // Close was called; the flusher closes the socket once it is done
	err      error // the first write error; every later Write returns it

	closeWait time.Duration // writeBehindCloseWait
}

func newWriteBehind(c net.Conn) *writeBehind {
	w := &writeBehind{Conn: c, closeWait: writeBehindCloseWait}
	w.changed.L = &w.mu
	return w
}

// Write queues p and starts the flusher if it is not running. It waits while the queue is
// full, and returns the error of an earlier write, if any: the bytes of a Write that returned
// nil reach the socket unless a later flush fails.
func (w *writeBehind) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && !w.closed && len(w.queued) >= writeBehindLimit {
		w.changed.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, net.ErrClosed
	}
	w.queued = append(w.queued, p...)
	if !w.flushing {
		w.flushing = true
		go w.flush()
	}
	return len(p), nil
}

// flush writes the queue until it is empty or a write fails, and closes the socket if Close
// was called meanwhile.
func (w *writeBehind) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queued) > 0 && w.err == nil {
		buf := w.queued
		w.queued, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		_, err := w.Conn.Write(buf)
		w.mu.Lock()
		if cap(buf) <= writeBehindKeep {
			w.spare = buf[:0]
		}
		if err != nil && w.err == nil {
			w.err = err
		}
		w.changed.Broadcast()
	}
	w.queued = w.queued[:0]
	if cap(w.queued) > writeBehindKeep {
		w.queued = nil
	}
	w.flushing = false
	w.changed.Broadcast()
	if w.closed {
		_ = w.Conn.Close()
	}
}

// Close stops further writes and closes the socket once what is queued is written, as a socket
// closed with unsent bytes in its kernel buffer goes on sending them: at once when nothing is
// queued, otherwise by the flusher, which gives a peer that does not read writeBehindCloseWait.
// Reads end at once either way (the read side is shut down), as they do on a closed socket.
func (w *writeBehind) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return net.ErrClosed
	}
	w.closed = true
	w.changed.Broadcast() // a Write waiting for room returns
	if !w.flushing {
		w.mu.Unlock()
		return w.Conn.Close()
	}
	_ = w.Conn.SetWriteDeadline(time.Now().Add(w.closeWait))
	w.mu.Unlock()
	if r, ok := w.Conn.(interface{ CloseRead() error }); ok {
		_ = r.CloseRead()
		return nil
	}
	// A socket that cannot shut down its read side alone (net.Pipe, say) is closed when the
	// flusher is done, and Close waits for that so that reads end with it.
	w.mu.Lock()
	for w.flushing {
		w.changed.Wait()
	}
	w.mu.Unlock()
	return nil
}

// canHijack reports whether rw, or a response writer it wraps (Unwrap), can be hijacked: the
// others are left to the WebSocket library, which refuses them before it answers the upgrade.
func canHijack(rw http.ResponseWriter) bool {
	for {
		switch t := rw.(type) {
		case http.Hijacker:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			rw = t.Unwrap()
		default:
			return false
		}
	}
}

// writeBehindHijacker hands the WebSocket library a written-behind socket when it hijacks the
// upgraded connection.
type writeBehindHijacker struct {
	http.ResponseWriter
}

var _ http.Hijacker = writeBehindHijacker{}

// Hijack takes over the connection. The returned writer, where the library writes its frames,
// writes to the written-behind socket.
func (h writeBehindHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	wb := newWriteBehind(c)
	brw.Writer.Reset(wb)
	return wb, brw, nil
}

// Unwrap gives http.ResponseController the response writer under this one.
func (h writeBehindHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }
