package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app"
)

// TestLoggerQuietsRiverRoutine: River's job counts and maintenance runs are debug records; the
// rest of its records, and ours, keep their level.
func TestLoggerQuietsRiverRoutine(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := app.NewLogger(&buf, false, level)
		ctx := context.Background()
		log.InfoContext(ctx, "producer: Producer job counts", "num_jobs_running", 0)
		log.InfoContext(ctx, "JobCleaner: Ran successfully", "num_jobs_deleted", 3)
		log.InfoContext(ctx, "River client started")
		log.InfoContext(ctx, "agentry listening")
		out := buf.String()
		require.Contains(t, out, "River client started")
		require.Contains(t, out, "agentry listening")
		if level == slog.LevelInfo {
			require.NotContains(t, out, "Producer job counts")
			require.NotContains(t, out, "Ran successfully")
		} else {
			require.Equal(t, 2, strings.Count(out, "level=DEBUG"), out)
		}
	}
}
