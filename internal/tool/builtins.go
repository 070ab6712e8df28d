package tool

import (
	"fmt"

	"github.com/agentry/agentry/internal/workspace"
)

// Names of the built-in workspace tools: integrations rely on them, so they never change.
const (
	ListFilesName   = "list_files"
	ReadFileName    = "read_file"
	WriteFileName   = "write_file"
	EditFileName    = "edit_file"
	SearchFilesName = "search_files"
	DeleteFileName  = "delete_file"
)

// Builtins returns the six built-in workspace tools over a workspace store with the default
// limits.
func Builtins() []Tool { return WorkspaceTools(&workspace.Store{}) }

// WorkspaceTools returns the six built-in workspace tools over ws: list_files, read_file,
// write_file, edit_file, search_files and delete_file.
func WorkspaceTools(ws *workspace.Store) []Tool {
	return []Tool{
		&ListFiles{ws: ws},
		&ReadFile{ws: ws},
		&WriteFile{ws: ws},
		&EditFile{ws: ws},
		&SearchFiles{ws: ws},
		&DeleteFile{ws: ws},
	}
}

// formatSize writes n bytes for a person or a model: "512 B", "1.5 KiB", "2.0 MiB".
func formatSize(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// plural writes "1 file", "2 files".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
