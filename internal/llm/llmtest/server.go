package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request a Server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Body is the decoded JSON body (nil when it was not JSON); Raw the bytes as received.
	Body map[string]any
	Raw  []byte
}

// Model returns the request's "model" field.
func (r Request) Model() string {
	m, _ := r.Body["model"].(string)
	return m
}

// Messages returns the request's "messages" array (each a decoded JSON object).
func (r Request) Messages() []map[string]any {
	raw, _ := r.Body["messages"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, m := range raw {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// Server is an HTTP test server speaking one provider's streaming wire format. Its URL (from the
// embedded httptest.Server) or BaseURL is what a provider's base URL option takes. It is closed
// when the test ends.
type Server struct {
	*httptest.Server
	format  format
	closing chan struct{}

	mu          sync.Mutex
	queue       []Reply
	def         Reply
	responder   func(Request) Reply
	requests    []Request
	disconnects int
	changed     chan struct{}
}

// NewAnthropicServer starts a server speaking the Anthropic Messages API (POST /v1/messages,
// SSE events message_start ... message_stop). Point anthropic.Options.BaseURL at BaseURL().
func NewAnthropicServer(t testing.TB) *Server { return newServer(t, anthropicFormat{}) }

// NewOpenAIServer starts a server speaking OpenAI Chat Completions (POST /v1/chat/completions,
// "data: {chat.completion.chunk}" lines ending with "data: [DONE]"). Point
// openai.Options.BaseURL at BaseURL() (which ends in /v1).
func NewOpenAIServer(t testing.TB) *Server { return newServer(t, openaiFormat{}) }

func newServer(t testing.TB, f format) *Server {
	s := &Server{
		format:  f,
		closing: make(chan struct{}),
		def:     Stream(Text("ok")),
		changed: make(chan struct{}),
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.closing)
		s.Server.Close()
	})
	return s
}

// BaseURL is the base URL the provider's SDK expects: the server's URL for Anthropic, URL + "/v1"
// for OpenAI.
func (s *Server) BaseURL() string { return s.URL + s.format.basePath() }

// Enqueue adds replies answered in order, one per request, before the responder and the default.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetDefault sets the reply used when the queue is empty and no responder is set.
func (s *Server) SetDefault(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = r
}

// SetResponder makes f script the replies when the queue is empty (nil removes it). f sees the
// request (e.g. to answer a tool result, or to call a tool forever).
func (s *Server) SetResponder(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// LastRequest returns the latest request; it fails the test when there is none.
func (s *Server) LastRequest(t testing.TB) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("llmtest: no request received")
	}
	return reqs[len(reqs)-1]
}

// Calls is the number of requests received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Disconnects counts the responses the client abandoned (connection closed) before the server
// finished them.
func (s *Server) Disconnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disconnects
}

// WaitDisconnects waits until at least n disconnects were seen, for at most timeout.
func (s *Server) WaitDisconnects(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, ch := s.disconnects, s.changed
		s.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

func (s *Server) noteDisconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disconnects++
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) next(req Request) Reply {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r
	}
	f, def := s.responder, s.def
	s.mu.Unlock()
	if f != nil {
		return f(req)
	}
	return def
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
	var body map[string]any
	if json.Unmarshal(raw, &body) == nil {
		req.Body = body
	}
	reply := s.next(req)

	sw := &sseWriter{w: w, ctx: r.Context(), closing: s.closing, server: s}
	sw.flusher, _ = w.(http.Flusher)
	if reply.HeaderDelay > 0 && !sw.sleep(reply.HeaderDelay) {
		return
	}
	switch {
	case r.Method != http.MethodPost || r.URL.Path != s.format.basePath()+s.format.path():
		reply = Reply{Status: http.StatusNotFound, Message: fmt.Sprintf("llmtest: no route for %s %s", r.Method, r.URL.Path)}
	case req.Body == nil:
		reply = Reply{Status: http.StatusBadRequest, Message: "llmtest: the body is not JSON"}
	case reply.Status == 0 && req.Body["stream"] != true:
		reply = Reply{Status: http.StatusBadRequest, Message: "llmtest: only streaming requests (stream: true) are supported"}
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status != 0 {
		body := []byte(reply.Body)
		if reply.Body == "" {
			body = s.format.errorBody(reply)
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(reply.Status)
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sw.flush()
	run(sw, s.format.streamer(req, reply), reply)
}

// run plays reply's steps through st.
func run(w *sseWriter, st streamer, reply Reply) {
	if !st.start(w) {
		return
	}
	for _, step := range reply.Steps {
		ok := true
		switch step.kind {
		case stepText:
			ok = st.text(w, step.deltas)
		case stepToolCall:
			ok = st.toolCall(w, step)
		case stepDelay:
			ok = w.sleep(step.delay)
		case stepWait:
			ok = w.pause(nil, step.gate)
		case stepRaw:
			ok = w.eventRaw(step.name, step.message)
		case stepCut:
			w.flush()
			// Abort the response: net/http closes the connection without ending the chunked body.
			panic(http.ErrAbortHandler)
		case stepMalformed:
			st.malformed(w)
			return
		case stepError:
			st.streamError(w, step)
			return
		}
		if !ok {
			return
		}
	}
	st.end(w)
}

type format interface {
	basePath() string
	path() string
	errorBody(r Reply) []byte
	streamer(req Request, r Reply) streamer
}

type streamer interface {
	start(w *sseWriter) bool
	text(w *sseWriter, deltas []string) bool
	toolCall(w *sseWriter, step Step) bool
	end(w *sseWriter) bool
	malformed(w *sseWriter)
	streamError(w *sseWriter, step Step)
}

// sseWriter writes server-sent events, flushing after each, and notices a client going away.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	ctx     context.Context
	closing <-chan struct{}
	server  *Server
	gone    bool
}

// event writes one event (named when name is not empty) with data marshalled as JSON.
func (s *sseWriter) event(name string, data any) bool {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("llmtest: marshal %T: %v", data, err))
	}
	return s.eventRaw(name, string(b))
}

func (s *sseWriter) eventRaw(name, data string) bool {
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return s.write(b.Bytes())
}

func (s *sseWriter) write(p []byte) bool {
	if s.gone {
		return false
	}
	if s.ctx.Err() != nil {
		s.lost()
		return false
	}
	if _, err := s.w.Write(p); err != nil {
		s.lost()
		return false
	}
	s.flush()
	return true
}

func (s *sseWriter) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

// sleep waits d; false when the client went away or the server is closing.
func (s *sseWriter) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	return s.pause(t.C, nil)
}

// pause waits for a Delay's timer or a Wait's gate (the other is nil).
func (s *sseWriter) pause(timer <-chan time.Time, gate <-chan struct{}) bool {
	select {
	case <-timer:
		return true
	case <-gate:
		return true
	case <-s.ctx.Done():
		s.lost()
		return false
	case <-s.closing:
		return false
	}
}

func (s *sseWriter) lost() {
	if !s.gone {
		s.gone = true
		s.server.noteDisconnect()
	}
}
