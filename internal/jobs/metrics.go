package jobs

import (
	"context"
	"errors"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/metrics"
)

// metricsHook counts job attempts that River will retry and jobs that end without success, as
// each attempt's result leaves its worker.
type metricsHook struct {
	river.HookDefaults
	m *metrics.Metrics
}

// WorkEnd classifies the attempt's error as River will: a cancel ends the job (cancelled), a
// snooze is no failure, any other error is retried until the job's last attempt (discarded).
func (h *metricsHook) WorkEnd(_ context.Context, job *rivertype.JobRow, err error) error {
	if err == nil {
		return nil
	}
	var cancel *river.JobCancelError
	var snooze *river.JobSnoozeError
	switch {
	case errors.As(err, &snooze):
	case errors.As(err, &cancel):
		h.m.JobDiscarded(job.Queue, job.Kind, string(rivertype.JobStateCancelled))
	case job.Attempt >= job.MaxAttempts:
		h.m.JobDiscarded(job.Queue, job.Kind, string(rivertype.JobStateDiscarded))
	default:
		h.m.JobRetried(job.Queue, job.Kind)
	}
	return err
}
