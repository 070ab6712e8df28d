package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/llm/providers"
)

// turnRec is what the clients saw of one run.
type turnRec struct {
	sent, acked time.Time // sendMessage sent, answered
	first       time.Time // first message.delta received
	end         time.Time // terminal event received
	status      string    // terminal event type
	tokens      int
	done        chan struct{}
}

// tracker follows runs through the events the fleet's sockets receive. Events can arrive
// before the sendMessage answer names the run, so records are made by whichever comes first.
type tracker struct {
	mu   sync.Mutex
	runs map[string]*turnRec
	// tokens counts tokens received in [from, to) (unix ns), for TOK-TPUT.
	tokens   atomic.Int64
	from, to atomic.Int64
	// countTokens makes it decode token deltas and count their tokens (TOK-TPUT).
	countTokens atomic.Bool
}

func newTracker() *tracker { return &tracker{runs: map[string]*turnRec{}} }

func (t *tracker) recLocked(runID string) *turnRec {
	r := t.runs[runID]
	if r == nil {
		r = &turnRec{done: make(chan struct{})}
		t.runs[runID] = r
	}
	return r
}

func (t *tracker) onEvent(_ string, ev wsEvent) {
	switch ev.Type {
	case "message.delta":
		n := 0
		if t.countTokens.Load() {
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			n = CountTokens(d.Text)
		}
		if at := ev.At.UnixNano(); at >= t.from.Load() && at < t.to.Load() {
			t.tokens.Add(int64(n))
		}
		t.mu.Lock()
		r := t.recLocked(ev.RunID)
		if r.first.IsZero() {
			r.first = ev.At
		}
		r.tokens += n
		t.mu.Unlock()
	case "execution.completed", "execution.failed", "execution.cancelled", "execution.timed_out":
		t.mu.Lock()
		r := t.recLocked(ev.RunID)
		if r.end.IsZero() {
			r.end, r.status = ev.At, ev.Type
			close(r.done)
		}
		t.mu.Unlock()
	}
}

// countTokensBetween makes onEvent count tokens received in [from, to).
func (t *tracker) countTokensBetween(from, to time.Time) {
	t.countTokens.Store(true)
	t.tokens.Store(0)
	t.from.Store(from.UnixNano())
	t.to.Store(to.UnixNano())
}

// fleet is the clients of a set of conversations: one socket per tenant (as a web app would
// hold), subscribed to conversationEvents of each of its conversations.
type fleet struct {
	socks []*wsConn
	tr    *tracker
}

// openFleet subscribes to convs.
func (e *env) openFleet(ctx context.Context, convs []conversation) (*fleet, error) {
	f := &fleet{tr: newTracker()}
	byTenant := map[int]*wsConn{}
	for _, c := range convs {
		w := byTenant[c.tenant]
		if w == nil {
			var err error
			if w, err = dialWS(ctx, e.baseURL, c.s.token, f.tr.onEvent); err != nil {
				f.close()
				return nil, err
			}
			byTenant[c.tenant] = w
			f.socks = append(f.socks, w)
		}
		if _, err := w.subscribeConversation(ctx, c.id); err != nil {
			f.close()
			return nil, err
		}
	}
	// The protocol does not acknowledge a subscription; give the server a moment to subscribe
	// (a turn whose events were missed times out and counts as an error).
	time.Sleep(200 * time.Millisecond)
	return f, nil
}

func (f *fleet) close() {
	for _, w := range f.socks {
		w.close()
	}
}

// turnTimeout bounds one turn: a turn that takes longer failed (a retry backs off for longer).
const turnTimeout = 30 * time.Second

// turn sends content to c and waits until the run's terminal event reached the client.
func (e *env) turn(ctx context.Context, f *fleet, c conversation, content string) (*turnRec, error) {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	sent := time.Now()
	runID, err := e.gql.sendMessage(ctx, c.s, c.id, content)
	if err != nil {
		return nil, err
	}
	acked := time.Now()
	f.tr.mu.Lock()
	r := f.tr.recLocked(runID)
	r.sent, r.acked = sent, acked
	f.tr.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		return r, fmt.Errorf("run %s: %w", runID, ctx.Err())
	}
	if r.status != "execution.completed" {
		return r, fmt.Errorf("run %s ended with %s", runID, r.status)
	}
	return r, nil
}

// directClient is the baseline of the LLM measures: the same provider code agentry runs,
// called directly.
type directClient struct {
	reg *llm.Registry
}

func (e *env) newDirectClient() *directClient {
	// Built exactly like agentry's registry (providers.New), so both use the same HTTP client
	// settings.
	return &directClient{reg: providers.New(providers.Config{OpenAIBaseURL: e.llm.URL, OpenAIAPIKey: "bench"})}
}

// directPrompt stands in for the system prompt agentry sends.
const directPrompt = "You are agentry, a capable assistant. You can use the tools offered to read and change the files of the user's project workspace. Be concise and accurate.\n\nBe helpful and balanced in tone. Answer at a normal length."

// stream calls model and reports each token piece; it returns when the first token arrived.
func (d *directClient) stream(ctx context.Context, model string, onText func(n int, at time.Time)) (time.Time, error) {
	p, m, err := d.reg.Resolve("openai:" + model)
	if err != nil {
		return time.Time{}, err
	}
	st, err := p.Stream(ctx, llm.Request{Model: m.ID, System: directPrompt, MaxTokens: 4096,
		Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{{Type: llm.BlockText, Text: "Hello, bench."}}}}})
	if err != nil {
		return time.Time{}, err
	}
	defer st.Close()
	var first time.Time
	for st.Next() {
		if ev := st.Event(); ev.Type == llm.EventTextDelta {
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			if onText != nil {
				onText(CountTokens(ev.Text), now)
			}
		}
	}
	return first, st.Err()
}

// breakdown says where the time of the completed turns went, on average (milliseconds): the
// sendMessage round trip, waiting in the queue (created -> started), the executor (started ->
// finished) and delivery of the terminal event (finished -> received).
func (e *env) breakdown(ctx context.Context, f *fleet) (map[string]float64, error) {
	f.tr.mu.Lock()
	type seen struct{ sent, acked, first, end time.Time }
	ids := make([]uuid.UUID, 0, len(f.tr.runs))
	recs := map[uuid.UUID]seen{}
	for runID, r := range f.tr.runs {
		if r.sent.IsZero() || r.end.IsZero() {
			continue
		}
		id, err := decodeID(runID)
		if err != nil {
			continue
		}
		ids = append(ids, id)
		recs[id] = seen{r.sent, r.acked, r.first, r.end}
	}
	f.tr.mu.Unlock()
	rows, err := e.owner.Query(ctx, "SELECT id, created_at, started_at, finished_at FROM runs WHERE id = ANY($1) AND finished_at IS NOT NULL", ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var n float64
	sum := map[string]float64{}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for rows.Next() {
		var id uuid.UUID
		var created, started, finished time.Time
		if err := rows.Scan(&id, &created, &started, &finished); err != nil {
			return nil, err
		}
		s := recs[id]
		n++
		sum["sendMessage round trip"] += ms(s.acked.Sub(s.sent))
		sum["queued (created -> started)"] += ms(started.Sub(created))
		sum["executor (started -> finished)"] += ms(finished.Sub(started))
		sum["delivery (finished -> received)"] += ms(s.end.Sub(finished))
		sum["whole turn"] += ms(s.end.Sub(s.sent))
		if !s.first.IsZero() {
			sum["first token (started -> received)"] += ms(s.first.Sub(started))
		}
	}
	for k := range sum {
		sum[k] /= max(n, 1)
	}
	return sum, rows.Err()
}
