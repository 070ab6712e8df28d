package contextwin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/memory"
	"github.com/agentry/agentry/internal/task"
)

func TestBuildAssemblesModeProjectTasksAndMemories(t *testing.T) {
	t.Parallel()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	tenantID, userID, projectID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	require.NoError(t, d.InSystemTx(ctx, "test user", func(ctx context.Context, tx *db.Tx) error {
		_, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: userID, Email: userID.String() + "@example.com"})
		return err
	}))
	require.NoError(t, d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: tenantID, Name: "acme"}); err != nil {
			return err
		}
		if _, err := tx.Q.ProjectInsert(ctx, dbsqlc.ProjectInsertParams{TenantID: tenantID, ID: projectID, Name: "Rocket site", Description: "The marketing site of the rocket launch.", IsDefault: true}); err != nil {
			return err
		}
		for _, tk := range []struct {
			title          string
			status         task.Status
			priority, slug string
		}{
			{"Write the launch page", task.StatusInProgress, "MEDIUM", "write-the-launch-page"},
			{"Fix the broken countdown", task.StatusOpen, "CRITICAL", "fix-the-broken-countdown"},
			{"Old finished thing", task.StatusDone, "HIGH", "old-finished-thing"},
		} {
			if _, err := tx.Q.TaskInsert(ctx, dbsqlc.TaskInsertParams{TenantID: tenantID, ID: uuid.Must(uuid.NewV7()), ProjectID: projectID, Title: tk.title,
				Tags: []string{}, Source: "user", Status: tk.status, Priority: tk.priority, Type: "TASK", Slug: tk.slug, Complexity: "STANDARD", CreatedBy: userID}); err != nil {
				return err
			}
		}
		s := memory.Scope{TenantID: tenantID, UserID: userID, ProjectID: projectID}
		if _, err := memory.Remember(ctx, tx, s, "The countdown must end at 09:00 UTC.", uuid.Nil); err != nil {
			return err
		}
		_, err := memory.Remember(ctx, tx, s, "The user's dog is called Laika.", uuid.Nil)
		return err
	}))

	build := func(mode, query string) string {
		var out string
		require.NoError(t, d.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			out, err = contextwin.Build(ctx, tx, contextwin.BuildInput{TenantID: tenantID, UserID: userID, ProjectID: projectID, Mode: mode, Query: query})
			return err
		}))
		return out
	}
	got := build("BRAINSTORM", "why is the countdown wrong?")
	require.True(t, strings.HasPrefix(got, contextwin.ModeInstruction("BRAINSTORM")))
	require.Contains(t, got, "Project: Rocket site")
	require.Contains(t, got, "The marketing site of the rocket launch.")
	critical := strings.Index(got, "Fix the broken countdown")
	medium := strings.Index(got, "Write the launch page")
	require.Positive(t, critical)
	require.Greater(t, medium, critical, "most urgent first")
	require.NotContains(t, got, "Old finished thing")
	require.Contains(t, got, "The countdown must end at 09:00 UTC.")
	require.NotContains(t, got, "Laika")

	got = build("DEFAULT", "hello")
	require.True(t, strings.HasPrefix(got, "Project: Rocket site"), "DEFAULT adds no mode instruction")
	require.NotContains(t, got, "remember")
}
