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
// queue without bound.
const writeBehindLimit = 256 << 10

// writeBehindKeep is the largest queue buffer kept for reuse between flushes.
const writeBehindKeep = 64 << 10

// writeBehindCloseWait bounds how long Close waits for queued bytes (a close frame among them)
// to go out to a peer that does not read.
const writeBehindCloseWait = 250 * time.Millisecond

// writeBehind is a net.Conn whose writes are queued and written by a flusher goroutine, which
// runs only while there is something queued. Reads and the rest pass through.
type writeBehind struct {
	net.Conn

	mu       sync.Mutex
	changed  sync.Cond // the queue was taken by the flusher, or the flusher stopped
	queued   []byte
	spare    []byte // the last flushed buffer, for the next queue
	flushing bool
	err      error // the first write error, or net.ErrClosed after Close; every later Write returns it
}

func newWriteBehind(c net.Conn) *writeBehind {
	w := &writeBehind{Conn: c}
	w.changed.L = &w.mu
	return w
}

// Write queues p and starts the flusher if it is not running. It waits while the queue is
// full, and returns the error of an earlier write, if any: the bytes of a Write that returned
// nil reach the socket unless a later flush fails.
func (w *writeBehind) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && len(w.queued) >= writeBehindLimit {
		w.changed.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	w.queued = append(w.queued, p...)
	if !w.flushing {
		w.flushing = true
		go w.flush()
	}
	return len(p), nil
}

// flush writes the queue until it is empty or a write fails.
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
	w.flushing = false
	w.changed.Broadcast()
}

// Close writes what is queued, waiting at most writeBehindCloseWait for a peer that does not
// read, and closes the socket.
func (w *writeBehind) Close() error {
	w.mu.Lock()
	if w.flushing {
		_ = w.Conn.SetWriteDeadline(time.Now().Add(writeBehindCloseWait))
	}
	for w.flushing {
		w.changed.Wait()
	}
	if w.err == nil {
		w.err = net.ErrClosed
	}
	w.mu.Unlock()
	return w.Conn.Close()
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
