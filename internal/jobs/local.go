package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/metrics"
	"github.com/agentry/agentry/internal/run"
)

// Local works, in this process, the chat turns it takes the message of (run.Local): the run
// is acquired in the transaction that creates it and its first attempt starts as soon as that
// commits, without a trip through River's queue. River remains the durable path: a failed
// attempt is retried through a job (run.Service.Reschedule), a run whose process died is taken
// over by the reaper once its lease expires, and a cancel from any process reaches the attempt
// through Redis (Listen) as River's reaches its jobs.
type Local struct {
	exec    *agent.Executor
	owner   string
	limit   int
	log     *slog.Logger
	metrics *metrics.Metrics
	tracer  trace.Tracer

	mu       sync.Mutex
	running  map[uuid.UUID]context.CancelCauseFunc
	stopping bool
	wg       sync.WaitGroup
}

// LocalOptions configure a Local runner.
type LocalOptions struct {
	Executor *agent.Executor
	// Owner names this process in leases; Limit is how many turns it works at once.
	Owner string
	Limit int
	Log   *slog.Logger
	// Metrics counts the attempts handed to River for a retry (nil: not counted).
	Metrics *metrics.Metrics
	// Tracer makes a span of each attempt, in the trace of the request that sent its message
	// (as River's middleware does for a job); nil: none.
	Tracer trace.TracerProvider
}

// NewLocal returns a runner of chat turns.
func NewLocal(o LocalOptions) *Local {
	tp := o.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Local{exec: o.Executor, owner: o.Owner, limit: max(o.Limit, 1), log: o.Log, metrics: o.Metrics,
		tracer: tp.Tracer("agentry/jobs"), running: map[uuid.UUID]context.CancelCauseFunc{}}
}

// Owner names this process in leases.
func (l *Local) Owner() string { return l.owner }

// Ready reports whether another chat turn may be claimed here now.
func (l *Local) Ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.stopping && len(l.running) < l.limit
}

// Begin prepares run runID's first attempt, acquired in the transaction that creates the run
// (run.Service.Place); sent is that transaction's context (only its trace is kept).
func (l *Local) Begin(sent context.Context, tenantID, runID uuid.UUID, maxAttempts int32) (run.Reads, func(run.Lease)) {
	reads, work := l.exec.Claimed(sent, tenantID, runID, agent.Attempt{Number: 1, Max: int(maxAttempts), Owner: l.owner, Local: true})
	return reads, func(lease run.Lease) { l.start(sent, lease, work) }
}

// start works the attempt of the acquired run in a goroutine of its own. A run acquired while
// the process began to stop is handed to River at once (its attempt starts cancelled).
func (l *Local) start(sent context.Context, lease run.Lease, work func(context.Context, run.Lease) error) {
	runID := lease.Run.ID
	ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(sent))
	ctx, span := l.tracer.Start(ctx, "local.work/run", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("run.id", runID.String())))
	ctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	if l.stopping {
		cancel(agent.ErrStopping)
	}
	l.running[runID] = cancel
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			delete(l.running, runID)
			l.mu.Unlock()
			cancel(nil)
			span.End()
		}()
		err := work(ctx, lease)
		var (
			retry    *agent.Retry
			terminal *agent.Terminal
		)
		switch {
		case err == nil, errors.As(err, &terminal):
		case errors.As(err, &retry):
			l.metrics.JobRetried(run.QueueChat, run.Args{}.Kind())
			l.log.InfoContext(ctx, "local attempt handed to River for a retry", "run_id", runID.String(), "error", err)
		default:
			// Its lease expires and the reaper hands the run to River.
			l.log.WarnContext(ctx, "local attempt failed", "run_id", runID.String(), "error", err)
		}
	}()
}

// cancel cancels the attempt of run runID if this process works it.
func (l *Local) cancel(runID uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.running[runID]; ok {
		c(agent.ErrCancelled)
	}
}

// Stop takes no more runs and waits for those running until ctx ends; it then cancels them
// (each hands its run to River, Reschedule) and waits at most hard more.
func (l *Local) Stop(ctx context.Context, hard time.Duration) error {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	for _, c := range l.running {
		c(agent.ErrStopping)
	}
	l.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-time.After(hard):
		return errors.New("local chat turns did not stop in time")
	}
}

// cancelChannel is the Redis channel of run cancels (CancelSignal, Listen).
func cancelChannel(prefix string) string { return prefix + "agentry:runs:cancel" }

// CancelSignal returns what run.WithCancelSignal needs: it publishes a run's id to every
// working process (Listen).
func CancelSignal(rdb redis.UniversalClient, prefix string, log *slog.Logger) func(runID uuid.UUID) {
	channel := cancelChannel(prefix)
	return func(runID uuid.UUID) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rdb.Publish(ctx, channel, runID.String()).Err(); err != nil {
			// The attempt sees the cancel at its next step (its run's cancel_requested).
			log.WarnContext(ctx, "signal a run's cancel", "run_id", runID.String(), "error", err)
		}
	}
}

// Listen cancels the attempts of this process whose run is cancelled anywhere (CancelSignal),
// until ctx ends. It returns once the subscription is confirmed. A cancel sent while the
// subscription reconnects is missed: the attempt then sees it at its next step, which reads the
// run's cancel_requested.
func (l *Local) Listen(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	return events.Listen(ctx, rdb, cancelChannel(prefix), func(payload string) {
		if id, err := uuid.Parse(payload); err == nil {
			l.cancel(id)
		}
	}, nil)
}
