package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/db/dbtest"
	"github.com/agentry/agentry/internal/memory"
	"github.com/agentry/agentry/internal/tool"
)

type bundle struct {
	db *db.DB
	// a: tenant A's first user in its first project; others vary one part of the scope.
	a, otherUser, otherProject, otherTenant memory.Scope
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d, _ := dbtest.Open(t)
	ctx := context.Background()
	tenant := func(users ...uuid.UUID) (uuid.UUID, []uuid.UUID) {
		id := uuid.Must(uuid.NewV7())
		var projects []uuid.UUID
		require.NoError(t, d.InTx(ctx, id, func(ctx context.Context, tx *db.Tx) error {
			if _, err := tx.Q.TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: id, Name: "t " + id.String()[:8]}); err != nil {
				return err
			}
			for i := range 2 {
				p, err := tx.Q.ProjectInsert(ctx, dbsqlc.ProjectInsertParams{TenantID: id, ID: uuid.Must(uuid.NewV7()), Name: fmt.Sprintf("p%d", i), IsDefault: i == 0})
				if err != nil {
					return err
				}
				projects = append(projects, p.ID)
			}
			return nil
		}))
		return id, projects
	}
	user := func() uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		require.NoError(t, d.InSystemTx(ctx, "test user", func(ctx context.Context, tx *db.Tx) error {
			_, err := tx.Q.UserInsert(ctx, dbsqlc.UserInsertParams{ID: id, Email: id.String() + "@example.com"})
			return err
		}))
		return id
	}
	u1, u2 := user(), user()
	ta, pa := tenant()
	tb, pb := tenant()
	return &bundle{
		db:           d,
		a:            memory.Scope{TenantID: ta, UserID: u1, ProjectID: pa[0]},
		otherUser:    memory.Scope{TenantID: ta, UserID: u2, ProjectID: pa[0]},
		otherProject: memory.Scope{TenantID: ta, UserID: u1, ProjectID: pa[1]},
		otherTenant:  memory.Scope{TenantID: tb, UserID: u1, ProjectID: pb[0]},
	}
}

func (b *bundle) remember(t *testing.T, s memory.Scope, content string) dbsqlc.Memory {
	t.Helper()
	var m dbsqlc.Memory
	require.NoError(t, b.db.InTx(context.Background(), s.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		m, err = memory.Remember(ctx, tx, s, content, uuid.Nil)
		return err
	}))
	return m
}

func (b *bundle) recall(t *testing.T, s memory.Scope, query string, limit, tokens int) []string {
	t.Helper()
	var out []string
	require.NoError(t, b.db.InTx(context.Background(), s.TenantID, func(ctx context.Context, tx *db.Tx) error {
		ms, err := memory.Recall(ctx, tx, s, query, limit, tokens)
		for _, m := range ms {
			out = append(out, m.Content)
		}
		return err
	}))
	return out
}

func TestRecallFindsRelevantMemoriesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.remember(t, b.a, "The user's favourite colour is teal.")
	b.remember(t, b.a, "The production database server is called hercules.")
	b.remember(t, b.a, "Logos must use the favourite colour and a serif font.")

	got := b.recall(t, b.a, "Which colour should the new logo have?", 10, 500)
	require.Len(t, got, 2)
	require.Equal(t, "Logos must use the favourite colour and a serif font.", got[0], "the memory sharing more words ranks first")
	require.Equal(t, "The user's favourite colour is teal.", got[1])
	require.Equal(t, []string{"The production database server is called hercules."}, b.recall(t, b.a, "restart hercules", 10, 500))
	require.Empty(t, b.recall(t, b.a, "what about the weather", 10, 500))
	require.Empty(t, b.recall(t, b.a, "the and of", 10, 500), "stop words alone match nothing")
	require.Empty(t, b.recall(t, b.a, `it's \ ' : | & !`, 10, 500), "punctuation is not query syntax")
}

func TestRecallIsScopedToUserProjectAndTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.remember(t, b.otherUser, "Another user's secret colour is magenta.")
	b.remember(t, b.otherProject, "In the other project the colour is orange.")
	b.remember(t, b.otherTenant, "In the other tenant the colour is crimson.")
	require.Empty(t, b.recall(t, b.a, "colour", 10, 500))
	require.Len(t, b.recall(t, b.otherUser, "colour", 10, 500), 1)
	require.Len(t, b.recall(t, b.otherTenant, "colour", 10, 500), 1)

	// Row-level security: even naming the other tenant inside this tenant's transaction finds
	// nothing.
	require.NoError(t, b.db.InTx(context.Background(), b.a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		ms, err := memory.Recall(ctx, tx, b.otherTenant, "colour", 10, 500)
		require.Empty(t, ms)
		return err
	}))
}

func TestRememberDeduplicatesAndValidates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m1 := b.remember(t, b.a, "The user prefers British spelling.")
	m2 := b.remember(t, b.a, "  The user prefers British spelling.  ")
	require.Equal(t, m1.ID, m2.ID)
	for _, bad := range []string{"", "   ", strings.Repeat("x", memory.MaxContentChars+1)} {
		err := b.db.InTx(context.Background(), b.a.TenantID, func(ctx context.Context, tx *db.Tx) error {
			_, err := memory.Remember(ctx, tx, b.a, bad, uuid.Nil)
			return err
		})
		require.Equal(t, apperr.BadUserInput, apperr.CodeOf(err))
	}
}

func TestRecallKeepsToTheTokenAllowance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 6 {
		b.remember(t, b.a, fmt.Sprintf("Fact %d about invoices: %s", i, strings.Repeat("detail ", 30)))
	}
	require.Len(t, b.recall(t, b.a, "invoices", 10, 10_000), 6)
	require.Len(t, b.recall(t, b.a, "invoices", 3, 10_000), 3)
	few := b.recall(t, b.a, "invoices", 10, 120) // each is about 57 tokens
	require.Len(t, few, 2)
	require.Len(t, b.recall(t, b.a, "invoices", 10, 1), 1, "the best one always fits")
}

func TestServiceListsAndDeletesTheCallersMemories(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := memory.NewService(b.db)
	mine := b.remember(t, b.a, "The user's cat is called Miso.")
	b.remember(t, b.otherProject, "The deadline is Friday.")
	theirs := b.remember(t, b.otherUser, "Someone else's cat is called Tofu.")
	ctx := auth.WithActor(context.Background(), auth.Actor{TenantID: b.a.TenantID, UserID: b.a.UserID, Role: auth.RoleMember})

	all, err := s.List(ctx, uuid.Nil, "", uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, all, 2)
	inProject, err := s.List(ctx, b.a.ProjectID, "", uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, inProject, 1)
	found, err := s.List(ctx, uuid.Nil, "cat", uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, mine.ID, found[0].ID)

	require.Equal(t, apperr.NotFound, apperr.CodeOf(s.Delete(ctx, theirs.ID)))
	require.NoError(t, s.Delete(ctx, mine.ID))
	require.Equal(t, apperr.NotFound, apperr.CodeOf(s.Delete(ctx, mine.ID)))
	require.Empty(t, b.recall(t, b.a, "cat", 10, 500))
	require.Len(t, b.recall(t, b.otherUser, "cat", 10, 500), 1)
}

func TestRememberAndRecallTools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := tool.NewEmptyRegistry()
	for _, tl := range tool.MemoryTools() {
		require.NoError(t, reg.Register(tl))
	}
	known, _ := reg.Get(tool.RememberName)
	require.False(t, known.ReadOnly())
	rc, _ := reg.Get(tool.RecallName)
	require.True(t, rc.ReadOnly())
	run := func(name, args string) (string, error) {
		var out string
		err := b.db.InTx(context.Background(), b.a.TenantID, func(ctx context.Context, tx *db.Tx) error {
			res, err := reg.Run(ctx, tool.Env{Tx: tx, TenantID: b.a.TenantID, ProjectID: b.a.ProjectID, UserID: b.a.UserID}, name, json.RawMessage(args))
			out = res.Output
			return err
		})
		return out, err
	}
	out, err := run("remember", `{"content":"The user deploys on Tuesdays."}`)
	require.NoError(t, err)
	require.Contains(t, out, "deploys on Tuesdays")
	out, err = run("recall", `{"query":"when does the user deploy?"}`)
	require.NoError(t, err)
	require.Contains(t, out, "The user deploys on Tuesdays.")
	out, err = run("recall", `{"query":"holidays"}`)
	require.NoError(t, err)
	require.Contains(t, out, "nothing remembered")
	_, err = run("remember", `{}`)
	require.Error(t, err)
}
