// Package workspace stores a project's files in Postgres (table workspace_files): UTF-8 text
// files keyed by (tenant, project, path), each write a new version. Every change also keeps
// the new state as a version in history (content-addressed blobs, history.go); changes made
// for a run are journalled with their inverses after the run's snapshot (see ForRun). Paths are normalised and
// checked by NormalizePath; there is no file system underneath. Every operation runs in the
// caller's tenant-scoped transaction (db.InTx) and names the tenant explicitly; row-level
// security backs that up.
package workspace

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Default limits.
const (
	// DefaultMaxFileBytes is the largest file content, in bytes: 1 MiB.
	DefaultMaxFileBytes = 1 << 20
	// DefaultMaxFiles is the most files one project's workspace holds.
	DefaultMaxFiles = 10_000
	// DefaultListLimit and MaxListLimit bound List: the default and the most paths returned.
	DefaultListLimit = 200
	MaxListLimit     = 1000
	// DefaultSearchLimit and MaxSearchLimit bound Search: the default and the most matching
	// lines returned.
	DefaultSearchLimit = 50
	MaxSearchLimit     = 500
	// MaxQueryBytes is the longest search query.
	MaxQueryBytes = 1000
)

// How much of a matching line Search returns: up to searchWidth characters, starting up to
// searchLead characters before the first match.
const (
	searchLead  = 60
	searchWidth = 300
)

// Limits bounds what a workspace holds. A zero field means its default.
type Limits struct {
	// MaxFileBytes is the largest file content in bytes (default DefaultMaxFileBytes).
	MaxFileBytes int
	// MaxFiles is the most files in one project's workspace (default DefaultMaxFiles).
	MaxFiles int
}

func (l Limits) maxFileBytes() int {
	if l.MaxFileBytes > 0 {
		return l.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (l Limits) maxFiles() int {
	if l.MaxFiles > 0 {
		return l.MaxFiles
	}
	return DefaultMaxFiles
}

// Store reads and writes workspace files. It holds no state but its limits; the zero value
// (and a nil *Store) uses the default limits and is ready to use.
type Store struct {
	Limits Limits
}

func (s *Store) limits() Limits {
	if s == nil {
		return Limits{}
	}
	return s.Limits
}

// File is a stored file with its content.
type File struct {
	Path    string
	Content string
	// Size is len(Content) in bytes.
	Size int
	// Version starts at 1 when the file is created and grows by one with each write, edit or
	// delete (history keeps a version per change; a file re-created after a delete continues).
	Version   int
	SHA256    [sha256.Size]byte
	UpdatedAt time.Time
}

// FileInfo describes a file without its content.
type FileInfo struct {
	Path      string
	Size      int
	Version   int
	UpdatedAt time.Time
}

// Listing is the answer to List. Truncated says that more files matched than were returned.
type Listing struct {
	Files     []FileInfo
	Truncated bool
}

// Match is one line that contains a search query.
type Match struct {
	Path string
	// Line is the 1-based line number (lines end at "\n").
	Line int
	// Text is the line without its line ending. A long line is cut to a window around the
	// first match, and "…" marks each cut end.
	Text string
}

// SearchResult is the answer to Search. Truncated says that more lines matched than were
// returned.
type SearchResult struct {
	Matches   []Match
	Truncated bool
}

// Read returns the file at path, or NOT_FOUND.
func (s *Store) Read(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, path string) (File, error) {
	p, err := NormalizePath(path)
	if err != nil {
		return File{}, err
	}
	row, err := tx.Q.WorkspaceFileGet(ctx, dbsqlc.WorkspaceFileGetParams{TenantID: tenantID, ProjectID: projectID, Path: p})
	if db.IsNoRows(err) {
		return File{}, notFound(p)
	}
	if err != nil {
		return File{}, fmt.Errorf("read workspace file %s: %w", p, err)
	}
	return fileFrom(row), nil
}

// Write stores content at path, creating the file (version 1) or replacing its content (the
// version grows by one, even when the content is unchanged). It returns the new version.
// Content must be UTF-8 text without NUL bytes and at most the file size limit; a new file must
// fit in the file-count limit. A project that does not exist is NOT_FOUND.
func (s *Store) Write(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, path, content string) (int, error) {
	p, err := NormalizePath(path)
	if err != nil {
		return 0, err
	}
	if err := s.checkContent(p, content); err != nil {
		return 0, err
	}
	if err := s.beforeChange(ctx, tx, tenantID, projectID); err != nil {
		return 0, err
	}
	before, err := currentSHA(ctx, tx, tenantID, projectID, p)
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256([]byte(content))
	version, err := tx.Q.WorkspaceFileUpdate(ctx, dbsqlc.WorkspaceFileUpdateParams{
		TenantID: tenantID, ProjectID: projectID, Path: p,
		Content: content, Size: int32(len(content)), Sha256: sum[:],
	})
	if err == nil {
		return s.afterChange(ctx, tx, tenantID, projectID, p, before, sum[:], content, int(version))
	}
	if !db.IsNoRows(err) {
		return 0, fmt.Errorf("write workspace file %s: %w", p, err)
	}
	// A new file: creations are serialised per project so that the count below stays true
	// until this transaction ends.
	if err := s.lockForCreate(ctx, tx, tenantID, projectID); err != nil {
		return 0, err
	}
	version, err = tx.Q.WorkspaceFileUpsert(ctx, dbsqlc.WorkspaceFileUpsertParams{
		TenantID: tenantID, ProjectID: projectID, Path: p,
		Content: content, Size: int32(len(content)), Sha256: sum[:],
	})
	if err != nil {
		return 0, fmt.Errorf("create workspace file %s: %w", p, err)
	}
	return s.afterChange(ctx, tx, tenantID, projectID, p, before, sum[:], content, int(version))
}

// lockForCreate locks the project's workspace against concurrent creations and checks that one
// more file fits.
func (s *Store) lockForCreate(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID) error {
	if _, err := tx.Q.WorkspaceLock(ctx, dbsqlc.WorkspaceLockParams{TenantID: tenantID, ID: projectID}); err != nil {
		if db.IsNoRows(err) {
			return apperr.NotFoundf("project")
		}
		return fmt.Errorf("lock workspace %s: %w", projectID, err)
	}
	n, err := tx.Q.WorkspaceFileCount(ctx, dbsqlc.WorkspaceFileCountParams{TenantID: tenantID, ProjectID: projectID})
	if err != nil {
		return fmt.Errorf("count workspace files: %w", err)
	}
	if limit := s.limits().maxFiles(); n >= int64(limit) {
		return apperr.New(apperr.BadUserInput,
			"workspace is full: it holds %d files, the most a project may have; delete files or overwrite an existing one", n).
			With("limit", limit)
	}
	return nil
}

// Edit replaces oldText with newText in the file at path, exactly (no patterns, no whitespace
// folding). Without replaceAll, oldText must occur exactly once: zero occurrences or several
// are BAD_USER_INPUT errors that say which. It returns the new version and the number of
// replacements. oldText must not be empty and must differ from newText; the result must fit
// the file size limit.
func (s *Store) Edit(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, path, oldText, newText string, replaceAll bool) (version, replaced int, err error) {
	p, err := NormalizePath(path)
	if err != nil {
		return 0, 0, err
	}
	if oldText == "" {
		return 0, 0, apperr.Invalid("old_string", "is empty; give the exact text to replace (use write to replace a whole file)")
	}
	if oldText == newText {
		return 0, 0, apperr.Invalid("new_string", "is the same as old_string; nothing would change")
	}
	if err := s.beforeChange(ctx, tx, tenantID, projectID); err != nil {
		return 0, 0, err
	}
	row, err := tx.Q.WorkspaceFileGetForUpdate(ctx, dbsqlc.WorkspaceFileGetForUpdateParams{TenantID: tenantID, ProjectID: projectID, Path: p})
	if db.IsNoRows(err) {
		return 0, 0, notFound(p)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read workspace file %s: %w", p, err)
	}
	n := strings.Count(row.Content, oldText)
	switch {
	case n == 0:
		return 0, 0, apperr.Invalid("old_string", "not found in %s; it must match the file exactly, including whitespace and indentation (read the file first)", p)
	case n > 1 && !replaceAll:
		return 0, 0, apperr.Invalid("old_string", "occurs %d times in %s; add surrounding lines to make it unique, or set replace_all to replace every occurrence", n, p).With("occurrences", n)
	}
	content := strings.Replace(row.Content, oldText, newText, 1)
	if replaceAll {
		content = strings.ReplaceAll(row.Content, oldText, newText)
	}
	if err := s.checkContent(p, content); err != nil {
		return 0, 0, err
	}
	sum := sha256.Sum256([]byte(content))
	v, err := tx.Q.WorkspaceFileUpdate(ctx, dbsqlc.WorkspaceFileUpdateParams{
		TenantID: tenantID, ProjectID: projectID, Path: p,
		Content: content, Size: int32(len(content)), Sha256: sum[:],
	})
	if err != nil {
		return 0, 0, fmt.Errorf("edit workspace file %s: %w", p, err)
	}
	version, err = s.afterChange(ctx, tx, tenantID, projectID, p, row.Sha256, sum[:], content, int(v))
	if err != nil {
		return 0, 0, err
	}
	if !replaceAll {
		n = 1
	}
	return version, n, nil
}

// Delete removes the file at path, or answers NOT_FOUND. It removes one file, never a
// directory's contents.
func (s *Store) Delete(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, path string) error {
	p, err := NormalizePath(path)
	if err != nil {
		return err
	}
	if err := s.beforeChange(ctx, tx, tenantID, projectID); err != nil {
		return err
	}
	before, err := currentSHA(ctx, tx, tenantID, projectID, p)
	if err != nil {
		return err
	}
	if before == nil {
		return notFound(p)
	}
	n, err := tx.Q.WorkspaceFileDelete(ctx, dbsqlc.WorkspaceFileDeleteParams{TenantID: tenantID, ProjectID: projectID, Path: p})
	if err != nil {
		return fmt.Errorf("delete workspace file %s: %w", p, err)
	}
	if n == 0 {
		return notFound(p)
	}
	_, err = s.afterChange(ctx, tx, tenantID, projectID, p, before, nil, "", 0)
	return err
}

// List returns the files at or under prefix (see NormalizePrefix: "" is the whole workspace,
// "src" or "src/" is the file src and everything beneath the directory src, never "srcfoo"),
// sorted by path in byte order, at most limit of them (0 or less: DefaultListLimit; at most
// MaxListLimit).
func (s *Store) List(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, prefix string, limit int) (Listing, error) {
	p, err := NormalizePrefix(prefix)
	if err != nil {
		return Listing{}, err
	}
	limit = clamp(limit, DefaultListLimit, MaxListLimit)
	rows, err := tx.Q.WorkspaceFileList(ctx, dbsqlc.WorkspaceFileListParams{
		TenantID: tenantID, ProjectID: projectID, Prefix: p, Lim: int32(limit + 1),
	})
	if err != nil {
		return Listing{}, fmt.Errorf("list workspace files: %w", err)
	}
	out := Listing{Files: make([]FileInfo, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			out.Truncated = true
			break
		}
		out.Files = append(out.Files, FileInfo{Path: r.Path, Size: int(r.Size), Version: int(r.Version), UpdatedAt: r.UpdatedAt})
	}
	return out, nil
}

// Search finds the lines that contain query in the files at or under pathPrefix (as in List),
// in path and line order, at most limit lines (0 or less: DefaultSearchLimit; at most
// MaxSearchLimit). The query is a literal, case-sensitive substring (no patterns) of one line:
// it must not be empty, contain a newline, or be longer than MaxQueryBytes. The matching is
// done in Postgres, and only as many files as could hold limit matches are split into lines.
func (s *Store) Search(ctx context.Context, tx *db.Tx, tenantID, projectID uuid.UUID, query, pathPrefix string, limit int) (SearchResult, error) {
	p, err := NormalizePrefix(pathPrefix)
	if err != nil {
		return SearchResult{}, err
	}
	switch {
	case query == "":
		return SearchResult{}, apperr.Invalid("query", "is empty; give the text to look for")
	case len(query) > MaxQueryBytes:
		return SearchResult{}, apperr.Invalid("query", "is %d bytes long; the limit is %d", len(query), MaxQueryBytes)
	case strings.ContainsAny(query, "\n\r"):
		return SearchResult{}, apperr.Invalid("query", "contains a line break; search matches within one line")
	case !utf8.ValidString(query) || strings.ContainsRune(query, 0):
		return SearchResult{}, apperr.Invalid("query", "is not UTF-8 text")
	}
	limit = clamp(limit, DefaultSearchLimit, MaxSearchLimit)
	rows, err := tx.Q.WorkspaceFileSearch(ctx, dbsqlc.WorkspaceFileSearchParams{
		TenantID: tenantID, ProjectID: projectID, Prefix: p, Query: query,
		Lead: searchLead, Width: searchWidth,
		// Every matching file has a matching line (the query has no newline), so limit+1
		// files hold at least limit+1 lines: enough to fill the answer and see that more exist.
		MaxFiles: int32(limit + 1), Lim: int32(limit + 1),
	})
	if err != nil {
		return SearchResult{}, fmt.Errorf("search workspace: %w", err)
	}
	out := SearchResult{Matches: make([]Match, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			out.Truncated = true
			break
		}
		text := r.Snippet
		cutEnd := int(r.StartCol)-1+utf8.RuneCountInString(text) < int(r.LineLen)
		if !cutEnd {
			text = strings.TrimSuffix(text, "\r")
		}
		if r.StartCol > 1 {
			text = "…" + text
		}
		if cutEnd {
			text += "…"
		}
		out.Matches = append(out.Matches, Match{Path: r.Path, Line: int(r.LineNo), Text: text})
	}
	return out, nil
}

// checkContent checks that content can be stored as the file p.
func (s *Store) checkContent(p, content string) error {
	if limit := s.limits().maxFileBytes(); len(content) > limit {
		return apperr.Invalid("content", "is %d bytes; a workspace file holds at most %d bytes (%s), so split %s into smaller files",
			len(content), limit, humanBytes(limit), p).With("limit", limit)
	}
	if !utf8.ValidString(content) {
		return apperr.Invalid("content", "is not valid UTF-8; the workspace stores text files only")
	}
	if strings.ContainsRune(content, 0) {
		return apperr.Invalid("content", "contains a NUL byte; the workspace stores text files only")
	}
	return nil
}

func notFound(p string) error {
	return apperr.NotFoundf(fmt.Sprintf("file %q", p)).With("path", p)
}

func fileFrom(r dbsqlc.WorkspaceFile) File {
	f := File{Path: r.Path, Content: r.Content, Size: int(r.Size), Version: int(r.Version), UpdatedAt: r.UpdatedAt}
	copy(f.SHA256[:], r.Sha256)
	return f
}

func clamp(n, def, most int) int {
	if n <= 0 {
		return def
	}
	return min(n, most)
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
