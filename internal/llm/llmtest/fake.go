package llmtest

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry/agentry/internal/llm"
)

// Fake is an in-process llm.Provider playing scripted Replies without HTTP, for tests of code
// above the providers (the executor) that need no wire format. It follows the servers'
// conventions: queued replies first, then the responder, then the default (Stream(Text("ok"))).
// An HTTP error reply fails Stream with llm.FromHTTP's classification; Cut, Malformed and
// StreamError fail the stream as the real providers do (TRANSIENT; an error type classified like
// Anthropic's); Delay honours the context.
type Fake struct {
	name string

	mu        sync.Mutex
	queue     []Reply
	def       Reply
	responder func(llm.Request) Reply
	requests  []llm.Request
	aborted   int
}

var _ llm.Provider = (*Fake)(nil)

// NewFake returns a Fake registered under name ("fake" when empty).
func NewFake(name string) *Fake {
	if name == "" {
		name = "fake"
	}
	return &Fake{name: name, def: Stream(Text("ok"))}
}

// Name implements llm.Provider.
func (f *Fake) Name() string { return f.name }

// Enqueue adds replies answered in order, one per call.
func (f *Fake) Enqueue(replies ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, replies...)
}

// SetDefault sets the reply used when the queue is empty and no responder is set.
func (f *Fake) SetDefault(r Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.def = r
}

// SetResponder makes fn script the replies when the queue is empty (nil removes it).
func (f *Fake) SetResponder(fn func(llm.Request) Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.responder = fn
}

// Requests returns every request received, in order.
func (f *Fake) Requests() []llm.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]llm.Request(nil), f.requests...)
}

// Calls is the number of Stream calls.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// Aborted counts the streams closed or cancelled before their end (the Fake's Disconnects).
func (f *Fake) Aborted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.aborted
}

// Stream implements llm.Provider.
func (f *Fake) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	var reply Reply
	switch {
	case len(f.queue) > 0:
		reply = f.queue[0]
		f.queue = f.queue[1:]
	case f.responder != nil:
		fn := f.responder
		f.mu.Unlock()
		reply = fn(req)
		f.mu.Lock()
	default:
		reply = f.def
	}
	f.mu.Unlock()

	s := &fakeStream{fake: f, ctx: ctx, reply: reply, plan: planOf(reply), stop: make(chan struct{})}
	if reply.HeaderDelay > 0 && !s.sleep(reply.HeaderDelay) {
		return nil, s.Err()
	}
	if err := ctx.Err(); err != nil {
		e := ctxErr(f.name, err)
		s.fail(e, true)
		return nil, e
	}
	if reply.Status != 0 {
		msg := reply.Message
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		return nil, llm.FromHTTP(f.name, reply.Status, reply.Header, msg, nil)
	}
	return s, nil
}

type fakeStream struct {
	fake    *Fake
	ctx     context.Context
	reply   Reply
	plan    plan
	step    int
	tools   int
	pending []llm.Event
	cur     llm.Event
	err     *llm.Error
	done    bool
	closed  atomic.Bool
	stop    chan struct{} // closed by Close
	// finished is set once the stream reached its end or failed (Close then aborts nothing).
	finished atomic.Bool
}

func (s *fakeStream) Next() bool {
	for {
		if s.closed.Load() || s.err != nil {
			return false
		}
		if err := s.ctx.Err(); err != nil {
			s.fail(ctxErr(s.fake.name, err), true)
			return false
		}
		if len(s.pending) > 0 {
			s.cur = s.pending[0]
			s.pending = s.pending[1:]
			return true
		}
		if s.done {
			s.finished.Store(true)
			return false
		}
		if s.step == len(s.reply.Steps) {
			s.done = true
			s.pending = append(s.pending,
				llm.Event{Type: llm.EventUsage, Usage: s.plan.usage},
				llm.Event{Type: llm.EventDone, StopReason: s.plan.stop})
			continue
		}
		st := s.reply.Steps[s.step]
		s.step++
		switch st.kind {
		case stepText:
			for _, d := range st.deltas {
				s.pending = append(s.pending, llm.Event{Type: llm.EventTextDelta, Text: d})
			}
		case stepToolCall:
			i := s.tools
			s.tools++
			s.pending = append(s.pending, llm.Event{Type: llm.EventToolCallStart, Index: i, ToolCallID: st.id, ToolName: st.name})
			for _, d := range st.deltas {
				s.pending = append(s.pending, llm.Event{Type: llm.EventToolCallDelta, Index: i, ArgsDelta: d})
			}
		case stepDelay:
			if !s.sleep(st.delay) {
				return false
			}
		case stepWait:
			if !s.pause(nil, st.gate) {
				return false
			}
		case stepCut:
			s.fail(&llm.Error{Class: llm.Transient, Provider: s.fake.name, Message: "stream cut: connection dropped", Err: io.ErrUnexpectedEOF}, false)
		case stepMalformed:
			s.fail(&llm.Error{Class: llm.Transient, Provider: s.fake.name, Message: "malformed stream event"}, false)
		case stepError:
			status := map[string]int{"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
				"rate_limit_error": 429, "overloaded_error": 529}[st.errType]
			if status == 0 {
				status = 500
			}
			e := llm.FromHTTP(s.fake.name, status, nil, st.errType+": "+st.message, nil)
			e.Status = 0
			s.fail(e, false)
		}
	}
}

func (s *fakeStream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	return s.pause(t.C, nil)
}

// pause waits for a Delay's timer or a Wait's gate (the other is nil).
func (s *fakeStream) pause(timer <-chan time.Time, gate <-chan struct{}) bool {
	select {
	case <-timer:
		return true
	case <-gate:
		return true
	case <-s.ctx.Done():
		s.fail(ctxErr(s.fake.name, s.ctx.Err()), true)
		return false
	case <-s.stop:
		return false
	}
}

func (s *fakeStream) fail(e *llm.Error, aborted bool) {
	s.err = e
	s.finished.Store(true)
	if aborted {
		s.fake.mu.Lock()
		s.fake.aborted++
		s.fake.mu.Unlock()
	}
}

func (s *fakeStream) Event() llm.Event { return s.cur }

func (s *fakeStream) Err() error {
	if s.err == nil {
		return nil
	}
	return s.err
}

// Close ends the stream (counted in Aborted when before its end); it may be called from another
// goroutine to abort a blocked Next.
func (s *fakeStream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	if !s.finished.Load() {
		s.fake.mu.Lock()
		s.fake.aborted++
		s.fake.mu.Unlock()
	}
	return nil
}

func ctxErr(provider string, err error) *llm.Error {
	e := *llm.Classify(err)
	e.Provider = provider
	return &e
}
