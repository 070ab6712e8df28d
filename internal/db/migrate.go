package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/agentry/agentry/migrations"
)

// Migrate brings the database at url up to date: agentry's migrations (goose, embedded) and then
// River's (rivermigrate). It runs as the URL's user, which owns the tables; it is idempotent and
// safe to run from several processes at once (goose holds a session lock, River migrates in a
// transaction).
func Migrate(ctx context.Context, url string, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, url) // the URL may carry pool parameters (pool_max_conns)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer pool.Close()
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	if err := MigrateSQL(ctx, sqlDB, url, log); err != nil {
		return err
	}
	return nil
}

// migrateLockID is the session advisory lock that serializes whole migrations (app and River):
// goose's own lock covers only its part, and River's migrator takes none.
const migrateLockID int64 = 0x61676e74_6d696772 // "agntmigr"

// MigrateSQL is Migrate on an open database/sql handle (the test template uses it).
func MigrateSQL(ctx context.Context, sqlDB *sql.DB, url string, log *slog.Logger) error {
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrateLockID); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockID)
	}()

	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("goose locker: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("app migrations: %w", err)
	}
	for _, r := range results {
		log.InfoContext(ctx, "applied migration", slog.String("migration", r.Source.Path), slog.Duration("took", r.Duration))
	}

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("river migration pool: %w", err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	for _, v := range res.Versions {
		log.InfoContext(ctx, "applied river migration", slog.Int("version", v.Version))
	}
	return nil
}

// ErrNotMigrated is the error of CheckMigrated for a database behind this binary's migrations.
var ErrNotMigrated = errors.New("run agentry migrate")

// CheckMigrated returns an error wrapping ErrNotMigrated, which says to run `agentry migrate`,
// when the database at url lacks some of agentry's or River's migrations: a process started on
// it would otherwise fail at its first query. It only reads, as the URL's user.
func CheckMigrated(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url) // the URL may carry pool parameters (pool_max_conns)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer pool.Close()
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	sources := provider.ListSources()
	want := sources[len(sources)-1].Version
	store, err := database.NewStore(database.DialectPostgres, goose.DefaultTablename)
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	have := int64(0)
	exists, err := store.(database.StoreExtender).TableExists(ctx, sqlDB)
	if err != nil {
		return fmt.Errorf("connect to Postgres (DATABASE_URL): %w", err)
	}
	if exists {
		have, err = store.GetLatestVersion(ctx, sqlDB)
		if err != nil && !errors.Is(err, database.ErrVersionNotFound) {
			return fmt.Errorf("read the applied migrations: %w", err)
		}
	}
	if have < want {
		if have == 0 {
			return fmt.Errorf("the database has none of agentry's tables: %w", ErrNotMigrated)
		}
		return fmt.Errorf("the database is at migration %d of %d: %w", have, want, ErrNotMigrated)
	}
	// Validate logs what is missing; the error says it.
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("check the migrations of River: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("the migrations of River are not all applied (%s): %w", strings.Join(res.Messages, "; "), ErrNotMigrated)
	}
	return nil
}
