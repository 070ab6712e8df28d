// Package dbtest gives each test its own Postgres database, cloned from a template that is
// migrated once per set of migrations (pgtestdb). Tests use DATABASE_URL's server (default the
// loopback one) and run in parallel.
package dbtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"testing"

	"github.com/peterldowns/pgtestdb"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/migrations"
)

// AppRole is the role the application pool switches to (created by the migrations).
const AppRole = "agentry_app"

// ServerURL is the Postgres server the tests use.
func ServerURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// URL returns the URL of a fresh, migrated database for t, owned by a non-superuser role (like
// a production migration user). The database is dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(ServerURL())
	require.NoError(t, err, "DATABASE_URL")
	pw, _ := u.User.Password()
	conf := pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       or(u.Port(), "5432"),
		User:       or(u.User.Username(), "postgres"),
		Password:   pw,
		Database:   "postgres",
		Options:    "sslmode=disable",
		TestRole: &pgtestdb.Role{
			Username:     "agentry_test_owner",
			Password:     "agentry_test_owner",
			Capabilities: "NOSUPERUSER NOCREATEDB CREATEROLE",
		},
		ForceTerminateConnections: true,
	}
	return pgtestdb.Custom(t, conf, migrator{}).URL()
}

// Open returns the application's handle on a fresh database (pool running as AppRole), closed
// when t ends, and the database's owner URL.
func Open(t testing.TB) (*db.DB, string) {
	t.Helper()
	ownerURL := URL(t)
	d, err := db.Open(context.Background(), ownerURL, AppRole, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d, ownerURL
}

type migrator struct{}

// Hash identifies the template by the migration files' contents.
func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	h.Write([]byte("river v0.51.1"))
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func (migrator) Migrate(ctx context.Context, sqlDB *sql.DB, conf pgtestdb.Config) error {
	return db.MigrateSQL(ctx, sqlDB, conf.URL(), slog.New(slog.DiscardHandler))
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
