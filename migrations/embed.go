// Package migrations holds agentry's SQL migrations (goose format), embedded in the binary.
package migrations

import "embed"

// FS is the set of migration files, numbered 00001_*.sql.
//
//go:embed *.sql
var FS embed.FS
