package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/run"
)

// RunWorker works run jobs through the executor. The job's context is cancelled by River when
// the run is cancelled (JobCancel), which the executor sees as agent.ErrCancelled.
type RunWorker struct {
	river.WorkerDefaults[run.Args]
	exec  *agent.Executor
	owner string
	// base is the first retry delay; each retry doubles it.
	base time.Duration
	// retryAt holds, per job id, the earliest retry a failure asked for (Retry-After).
	retryAt sync.Map
}

// Timeout is disabled: the executor bounds each attempt by the user's timeoutSeconds.
func (w *RunWorker) Timeout(*river.Job[run.Args]) time.Duration { return -1 }

// Work runs one attempt, and says what River is to do with the job.
func (w *RunWorker) Work(ctx context.Context, job *river.Job[run.Args]) error {
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) {
			cancel(agent.ErrCancelled)
			return
		}
		cancel(context.Cause(ctx))
	})
	defer stop()
	prior := int(job.Args.Prior) // attempts made before this job (a local one: run.Service.Reschedule)
	err := w.exec.Execute(runCtx, job.Args.TenantID, job.Args.RunID, agent.Attempt{Number: prior + job.Attempt, Max: prior + job.MaxAttempts, Owner: w.owner, JobID: job.ID})
	var retry *agent.Retry
	if errors.As(err, &retry) {
		if retry.Delay > 0 {
			w.retryAt.Store(job.ID, time.Now().Add(retry.Delay))
		}
		return err
	}
	var terminal *agent.Terminal
	if errors.As(err, &terminal) {
		// Recorded as FAILED already; River must not retry it.
		return river.JobCancel(err)
	}
	return err
}

// NextRetry backs off exponentially from the base delay (base, 2x, 4x, ...), never sooner than
// a Retry-After the failure carried.
func (w *RunWorker) NextRetry(job *river.Job[run.Args]) time.Time {
	n := max(int(job.Args.Prior)+job.Attempt, 1)
	next := time.Now().Add(w.base << (n - 1))
	if v, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		if at := v.(time.Time); at.After(next) {
			next = at
		}
	}
	return next
}
