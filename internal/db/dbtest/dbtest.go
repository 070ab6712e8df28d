// Package dbtest gives each test its own Postgres database, cloned from a template that is
// migrated once per set of migrations (pgtestdb). Tests use DATABASE_URL's server (default the
// loopback one) and run in parallel.
package dbtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/peterldowns/pgtestdb"
	"github.com/pressly/goose/v3"
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
	return urlOf(t, migrator{})
}

// URLAt is URL with agentry's migrations applied up to version only (and none of River's): for
// tests of a later migration over rows stored before it (goose.NewProvider over migrations.FS
// migrates the rest).
func URLAt(t testing.TB, version int64) string {
	t.Helper()
	return urlOf(t, migrator{upTo: version})
}

func urlOf(t testing.TB, m migrator) string {
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
	// The test's name goes with every connection (pg_stat_activity.application_name, which
	// Postgres cuts to 63 bytes), to see which test holds the server's connections.
	return pgtestdb.Custom(t, conf, m).URL() + "&application_name=" + url.QueryEscape(t.Name())
}

// PoolSize is how many connections a pool of a test holds at most. Tests run in parallel
// processes against one server, which must not run out of connections: the whole suite fits in
// a server's max_connections of 50.
const PoolSize = 2

// PoolURL is url (a database's URL) with a pool of PoolSize connections at most: what a test
// gives a process it starts (apptest) as DATABASE_URL. Only pools understand it (db.Open,
// pgxpool); a single connection (pgx.Connect) takes url itself.
func PoolURL(url string) string { return PoolURLOf(url, PoolSize) }

// PoolURLOf is url with a pool of conns connections at most, for a process whose work needs
// more at once (transactions that wait on each other's locks, each holding its connection).
func PoolURLOf(url string, conns int) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%spool_max_conns=%d", url, sep, conns)
}

// Open returns the application's handle on a fresh database (pool running as AppRole, PoolSize
// connections at most), closed when t ends, and the database's owner URL.
func Open(t testing.TB) (*db.DB, string) {
	t.Helper()
	ownerURL := URL(t)
	d, err := db.Open(context.Background(), PoolURL(ownerURL), AppRole, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d, ownerURL
}

// migrator migrates a template: every migration, or agentry's up to upTo (when not zero).
type migrator struct{ upTo int64 }

// Hash identifies the template by the migration files' contents (and upTo).
func (m migrator) Hash() (string, error) {
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
	if m.upTo != 0 {
		fmt.Fprintf(h, "up to %d", m.upTo)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func (m migrator) Migrate(ctx context.Context, sqlDB *sql.DB, conf pgtestdb.Config) error {
	if m.upTo == 0 {
		return db.MigrateSQL(ctx, sqlDB, conf.URL(), slog.New(slog.DiscardHandler))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, m.upTo)
	return err
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
