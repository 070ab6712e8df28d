package model

import (
	"encoding/hex"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/workspace"
)

// Workspace is a project's workspace; its fields resolve lazily.
type Workspace struct{ Project uuid.UUID }

func (w *Workspace) ProjectID() string { return EncodeID("Project", w.Project) }

// WorkspaceFile is a file; WithContent says whether content is shown.
type WorkspaceFile struct {
	Project     uuid.UUID
	File        workspace.File
	WithContent bool
}

func (f *WorkspaceFile) Path() string         { return f.File.Path }
func (f *WorkspaceFile) Size() int            { return f.File.Size }
func (f *WorkspaceFile) Version() int         { return f.File.Version }
func (f *WorkspaceFile) UpdatedAt() time.Time { return f.File.UpdatedAt }
func (f *WorkspaceFile) Content() *string {
	if !f.WithContent {
		return nil
	}
	return &f.File.Content
}

// FileVersion is one recorded state of a file.
type FileVersion struct{ Row workspace.Version }

func (v *FileVersion) Version() int         { return v.Row.Version }
func (v *FileVersion) Deleted() bool        { return v.Row.Deleted }
func (v *FileVersion) Size() int            { return v.Row.Size }
func (v *FileVersion) CreatedAt() time.Time { return v.Row.CreatedAt }
func (v *FileVersion) Sha256() *string {
	if v.Row.SHA256 == nil {
		return nil
	}
	s := hex.EncodeToString(v.Row.SHA256)
	return &s
}
func (v *FileVersion) RunID() *string {
	if !v.Row.RunID.Valid {
		return nil
	}
	s := EncodeID("Run", v.Row.RunID.UUID)
	return &s
}

// Snapshot is a workspace snapshot row.
type Snapshot struct{ Row workspace.Snapshot }

func (s *Snapshot) ID() string           { return EncodeID("Snapshot", s.Row.ID) }
func (*Snapshot) IsNode()                {}
func (s *Snapshot) GetID() string        { return s.ID() }
func (s *Snapshot) Label() *string       { return s.Row.Label }
func (s *Snapshot) Committed() bool      { return s.Row.State != workspace.SnapshotOpen }
func (s *Snapshot) State() string        { return s.Row.State }
func (s *Snapshot) Kind() string         { return s.Row.Kind }
func (s *Snapshot) CreatedAt() time.Time { return s.Row.CreatedAt }
