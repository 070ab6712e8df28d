package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeLLM is an in-process OpenAI Chat Completions server (POST /v1/chat/completions, SSE
// "data: {chat.completion.chunk}" lines ending with "data: [DONE]") that answers at once, or
// with a realistic pace, so that agentry's real OpenAI provider code runs against it. The model
// name of a request says what to answer:
//
//	bench-t<N>     N tokens, as fast as the connection takes them
//	bench-t<N>-r   N tokens, 300 ms to the first one and 20 ms between tokens
//	bench-hold     one empty chunk, then nothing until Release (or the client goes away)
//
// Every token is one word with a leading space, so CountTokens counts them in any coalesced text.
type FakeLLM struct {
	srv  *http.Server
	ln   net.Listener
	URL  string // base URL for the OpenAI provider (ends in /v1)
	mu   sync.Mutex
	hold chan struct{}

	// FirstToken and PerToken pace the realistic models.
	FirstToken, PerToken time.Duration
}

// Realistic pacing of the -r models.
const (
	realisticFirstToken = 300 * time.Millisecond
	realisticPerToken   = 20 * time.Millisecond
)

// StartFakeLLM listens on a loopback port. Close stops it.
func StartFakeLLM() (*FakeLLM, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake LLM listen: %w", err)
	}
	f := &FakeLLM{ln: ln, URL: "http://" + ln.Addr().String() + "/v1", hold: make(chan struct{}),
		FirstToken: realisticFirstToken, PerToken: realisticPerToken}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Release ends every stream held so far (bench-hold); later ones hold again.
func (f *FakeLLM) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.hold)
	f.hold = make(chan struct{})
}

func (f *FakeLLM) held() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hold
}

// Close stops the server.
func (f *FakeLLM) Close() {
	f.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

// words are the fake model's tokens: each starts with a space (CountTokens relies on it).
var words = []string{" alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel"}

// CountTokens returns the number of fake tokens in text.
func CountTokens(text string) int { return strings.Count(text, " ") }

type fakeReq struct {
	Model string `json:"model"`
}

// chunk framing, precomputed per model name
var (
	chunkHead = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":`
	chunkMid  = `,"system_fingerprint":"fp_bench","choices":[{"index":0,"delta":`
)

func (f *FakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no route","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	req, ok := modelOf(body)
	if !ok {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	tokens, realistic, hold := parseModel(req.Model)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	model := strconv.Quote(req.Model)
	var buf bytes.Buffer
	chunk := func(delta, finish string) {
		buf.WriteString(chunkHead)
		buf.WriteString(model)
		buf.WriteString(chunkMid)
		buf.WriteString(delta)
		buf.WriteString(`,"logprobs":null,"finish_reason":`)
		buf.WriteString(finish)
		buf.WriteString("}]}\n\n")
	}
	flush := func() bool {
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		buf.Reset()
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	chunk(`{"role":"assistant","content":"","refusal":null}`, "null")
	if hold {
		if !flush() {
			return
		}
		select {
		case <-f.held():
		case <-r.Context().Done():
			return
		}
		tokens = 1
	}
	if realistic && !sleep(f.FirstToken) {
		return
	}
	for i := 0; i < tokens; i++ {
		if realistic && i > 0 && !sleep(f.PerToken) {
			return
		}
		chunk(`{"content":`+strconv.Quote(words[i%len(words)])+`}`, "null")
		// The first token goes out alone (time to first token); at zero latency the rest go in
		// one write, as fast as the client reads.
		if (i == 0 || realistic) && !flush() {
			return
		}
	}
	chunk(`{}`, `"stop"`)
	fmt.Fprintf(&buf, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":%s,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}}`+"\n\n",
		model, 100, tokens, 100+tokens)
	buf.WriteString("data: [DONE]\n\n")
	flush()
}

// modelOf returns the request's model. The body is a whole conversation; the fake reads only
// the model (found without decoding the rest, falling back to decoding), so that it costs as
// little of the machine's CPU as an LLM far away would.
func modelOf(body []byte) (fakeReq, bool) {
	var req fakeReq
	if i := bytes.Index(body, []byte(`"model":"bench-`)); i >= 0 {
		rest := body[i+len(`"model":"`):]
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			req.Model = string(rest[:j])
			return req, true
		}
	}
	return req, json.Unmarshal(body, &req) == nil
}

// parseModel reads the behaviour out of a model name (see FakeLLM).
func parseModel(m string) (tokens int, realistic, hold bool) {
	if m == "bench-hold" {
		return 0, false, true
	}
	s := strings.TrimPrefix(m, "bench-t")
	if r, ok := strings.CutSuffix(s, "-r"); ok {
		s, realistic = r, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		n = 20
	}
	return n, realistic, false
}
