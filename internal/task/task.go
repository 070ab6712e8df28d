package task

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/status"
)

// Status is the status of a task.
type Status = status.Task

// Statuses of a task.
const (
	StatusOpen       Status = "OPEN"
	StatusReady      Status = "READY"
	StatusInProgress Status = "IN_PROGRESS"
	StatusDone       Status = "DONE"
)

// Complexities of a task; they scale a task run's limits (see the package comment).
const (
	ComplexitySimple   = "SIMPLE"
	ComplexityStandard = "STANDARD"
	ComplexityComplex  = "COMPLEX"
)

// Defaults of a new task.
const (
	DefaultPriority   = "MEDIUM"
	DefaultType       = "TASK"
	DefaultComplexity = ComplexityStandard
	// SourceUser is the source of a task a person made (others name the role that made it).
	SourceUser = "user"
)

// The values of a task's enumerated fields, by GraphQL field name.
var (
	Statuses     = []string{string(StatusOpen), string(StatusReady), string(StatusInProgress), string(StatusDone)}
	Priorities   = []string{"LOW", "MEDIUM", "HIGH", "CRITICAL"}
	Types        = []string{"BUG", "FEATURE", "TASK"}
	Complexities = []string{ComplexitySimple, ComplexityStandard, ComplexityComplex}
)

// Input limits; the table's CHECK constraints match.
const (
	MaxTitleChars  = 300
	MaxTextChars   = 50_000 // description, acceptance criteria
	MaxTags        = 20
	MaxTagChars    = 50
	MaxSourceChars = 50
)

// Instruction ends the trigger message of every task run: it tells the model how to finish.
const Instruction = "Work on this task using the tools until it is done. When it is done, answer with a short summary and no tool call."

// Models knows the model a task run's conversation uses.
type Models interface {
	// Default is the configured default model ("provider:model").
	Default() string
}

// Service is the task domain.
type Service struct {
	db     *db.DB
	runs   *run.Service
	models Models
	log    *slog.Logger
	admit  Admission
	// onReady starts what waits for a task to become READY (nil: nothing does).
	onReady ReadyHook
}

// ReadyHook runs in the transaction that makes a task READY by hand (updateTask), with the
// user who did: routines with a TASK_READY trigger start there.
type ReadyHook func(ctx context.Context, tx *db.Tx, userID uuid.UUID, t dbsqlc.Task) error

// OnReady connects what starts when a task becomes READY. Call it while wiring.
func (s *Service) OnReady(h ReadyHook) { s.onReady = h }

// Admission refuses a new run that no budget can pay for (usage.Service implements it).
type Admission interface {
	// Admit returns BUDGET_EXCEEDED while a budget applying to the user has nothing left.
	Admit(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) error
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithAdmission connects budget admission (without: every run is admitted).
func WithAdmission(a Admission) Option { return func(s *Service) { s.admit = a } }

// NewService returns the task service.
func NewService(d *db.DB, runs *run.Service, models Models, log *slog.Logger, options ...Option) *Service {
	s := &Service{db: d, runs: runs, models: models, log: log}
	for _, o := range options {
		o(s)
	}
	return s
}

// NewTask is the input of Create. Empty strings take the defaults (no description, MEDIUM,
// TASK, STANDARD, source "user"; the default project when ProjectID is uuid.Nil).
type NewTask struct {
	ProjectID          uuid.UUID
	Title              string
	Description        string
	AcceptanceCriteria string
	Tags               []string
	Priority           string
	Type               string
	Complexity         string
	// Source is "user" (the default) or the name of the role that made the task.
	Source string
}

// Patch changes some of a task's fields; nil fields stay as they are. Tags replaces the tags
// when not nil (an empty, non-nil slice clears them); an empty Description or
// AcceptanceCriteria clears it. The slug never changes.
type Patch struct {
	Title              *string
	Description        *string
	AcceptanceCriteria *string
	Tags               []string
	Status             *string
	Priority           *string
	Type               *string
	Complexity         *string
}

// Create makes a task in a project (the tenant's default one when none is named), status OPEN,
// with a slug derived from the title and unique in the project. MEMBER or higher.
func (s *Service) Create(ctx context.Context, in NewTask) (dbsqlc.Task, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	title, err := checkTitle(in.Title)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	desc, err := checkText("description", in.Description)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	criteria, err := checkText("acceptanceCriteria", in.AcceptanceCriteria)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	priority, err := checkEnum("priority", in.Priority, DefaultPriority, Priorities)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	typ, err := checkEnum("type", in.Type, DefaultType, Types)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	complexity, err := checkEnum("complexity", in.Complexity, DefaultComplexity, Complexities)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	source := strings.TrimSpace(in.Source)
	if source == "" {
		source = SourceUser
	}
	if utf8.RuneCountInString(source) > MaxSourceChars {
		return dbsqlc.Task{}, apperr.Invalid("source", "must be at most %d characters", MaxSourceChars)
	}
	var out dbsqlc.Task
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		project, err := s.project(ctx, tx, a.TenantID, in.ProjectID)
		if err != nil {
			return err
		}
		// The project's row lock serialises slug assignment in the project.
		if _, err := tx.Q.TaskProjectLock(ctx, dbsqlc.TaskProjectLockParams{TenantID: a.TenantID, ID: project.ID}); err != nil {
			return fmt.Errorf("lock project: %w", err)
		}
		base := Slugify(title)
		taken, err := tx.Q.TaskSlugsLike(ctx, dbsqlc.TaskSlugsLikeParams{TenantID: a.TenantID, ProjectID: project.ID, Base: base})
		if err != nil {
			return fmt.Errorf("list slugs: %w", err)
		}
		out, err = tx.Q.TaskInsert(ctx, dbsqlc.TaskInsertParams{
			TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), ProjectID: project.ID, Title: title,
			Description: desc, AcceptanceCriteria: criteria, Tags: tags, Source: source, Status: StatusOpen,
			Priority: priority, Type: typ, Slug: uniqueSlug(base, taken), Complexity: complexity, CreatedBy: a.UserID,
		})
		if err != nil {
			return fmt.Errorf("insert task: %w", err)
		}
		return nil
	})
	return out, err
}

// Update changes the fields p gives. MEMBER or higher; another tenant's task is NOT_FOUND.
func (s *Service) Update(ctx context.Context, id uuid.UUID, p Patch) (dbsqlc.Task, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	params := dbsqlc.TaskUpdateParams{TenantID: a.TenantID, ID: id}
	if p.Title != nil {
		t, err := checkTitle(*p.Title)
		if err != nil {
			return dbsqlc.Task{}, err
		}
		params.Title = &t
	}
	if p.Description != nil {
		d, err := checkText("description", *p.Description)
		if err != nil {
			return dbsqlc.Task{}, err
		}
		params.Description = orEmpty(d)
	}
	if p.AcceptanceCriteria != nil {
		c, err := checkText("acceptanceCriteria", *p.AcceptanceCriteria)
		if err != nil {
			return dbsqlc.Task{}, err
		}
		params.AcceptanceCriteria = orEmpty(c)
	}
	if p.Tags != nil {
		if params.Tags, err = checkTags(p.Tags); err != nil {
			return dbsqlc.Task{}, err
		}
	}
	for _, e := range []struct {
		field  string
		in     *string
		out    **string
		values []string
	}{
		{"status", p.Status, &params.Status, Statuses},
		{"priority", p.Priority, &params.Priority, Priorities},
		{"type", p.Type, &params.Type, Types},
		{"complexity", p.Complexity, &params.Complexity, Complexities},
	} {
		if e.in == nil {
			continue
		}
		v, err := checkEnum(e.field, *e.in, "", e.values)
		if err != nil {
			return dbsqlc.Task{}, err
		}
		*e.out = &v
	}
	var out dbsqlc.Task
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		becomesReady := false
		if params.Status != nil && Status(*params.Status) == StatusReady && s.onReady != nil {
			old, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: a.TenantID, ID: id})
			if err != nil {
				return err
			}
			becomesReady = old.Status != StatusReady
		}
		out, err = tx.Q.TaskUpdate(ctx, params)
		if err != nil || !becomesReady {
			return err
		}
		if err := s.onReady(ctx, tx, a.UserID, out); err != nil {
			return err
		}
		out, err = tx.Q.TaskGet(ctx, dbsqlc.TaskGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("task")
	}
	return out, err
}

// Get returns one of the tenant's tasks; any other is NOT_FOUND. VIEWER or higher.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (dbsqlc.Task, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Task{}, err
	}
	var out dbsqlc.Task
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.TaskGet(ctx, dbsqlc.TaskGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("task")
	}
	return out, err
}

// List returns a project's tasks (the default project's when projectID is uuid.Nil), newest
// first, after the cursor id. VIEWER or higher.
func (s *Service) List(ctx context.Context, projectID, after uuid.UUID, limit int) ([]dbsqlc.Task, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Task
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		project, err := s.project(ctx, tx, a.TenantID, projectID)
		if err != nil {
			return err
		}
		out, err = tx.Q.TaskList(ctx, dbsqlc.TaskListParams{TenantID: a.TenantID, ProjectID: project.ID, After: after, Lim: int32(limit)})
		return err
	})
	return out, err
}

// Runs returns a task's runs, newest first, after the cursor id. VIEWER or higher.
func (s *Service) Runs(ctx context.Context, taskID, after uuid.UUID, limit int) ([]dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.TaskRunList(ctx, dbsqlc.TaskRunListParams{TenantID: a.TenantID, TaskID: uuid.NullUUID{UUID: taskID, Valid: true}, After: after, Lim: int32(limit)})
		return err
	})
	return out, err
}

// Run starts a run of kind TASK on the task: in one transaction it makes the run's own
// conversation, the run, its trigger message (the task and Instruction) and task.queued, moves
// an OPEN task to READY and enqueues the run's job. A DONE task, or one that already has a run
// that has not ended, is CONFLICT. MEMBER or higher; another tenant's task is NOT_FOUND.
func (s *Service) Run(ctx context.Context, id uuid.UUID) (dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Run{}, err
	}
	var out dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		t, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("task")
		}
		if err != nil {
			return err
		}
		if t.Status == StatusDone {
			return apperr.New(apperr.Conflict, "the task is done; set its status back to run it again")
		}
		// A task has one run at a time whoever started it, so this looks at every user's runs.
		var active dbsqlc.Run
		err = s.db.InTx(db.TenantWide(ctx, "a task's active run, whoever started it"), a.TenantID, func(ctx context.Context, tx *db.Tx) error {
			active, err = tx.Q.TaskActiveRun(ctx, dbsqlc.TaskActiveRunParams{TenantID: a.TenantID, TaskID: uuid.NullUUID{UUID: t.ID, Valid: true}})
			return err
		})
		if err == nil {
			return apperr.New(apperr.Conflict, "the task already has a %s run", active.Status).With("activeRunId", active.ID.String())
		}
		if !db.IsNoRows(err) {
			return err
		}
		if s.admit != nil {
			if err := s.admit.Admit(ctx, tx, a.TenantID, a.UserID); err != nil {
				return err
			}
		}
		set, err := settings.ForUser(ctx, tx, a)
		if err != nil {
			return err
		}
		own, err := s.runs.CreateOwn(ctx, tx, run.Own{
			TenantID: a.TenantID, UserID: a.UserID, ProjectID: t.ProjectID, ConversationKind: "TASK",
			Title: "Task: " + t.Title, // at most 306 characters: within a conversation title's 500
			Model: s.models.Default(), Kind: run.KindTask, TaskID: uuid.NullUUID{UUID: t.ID, Valid: true},
			MaxAttempts: int32(set.MaxRetries + 1), Prompt: Prompt(t), AuthorID: uuid.NullUUID{UUID: a.UserID, Valid: true},
			Queued: map[string]any{"taskId": t.ID},
		})
		if err != nil {
			return err
		}
		r := own.Run
		if t.Status == StatusOpen {
			if _, err := tx.Q.TaskSetStatus(ctx, dbsqlc.TaskSetStatusParams{TenantID: a.TenantID, ID: t.ID, Status: StatusReady}); err != nil {
				return fmt.Errorf("set task status: %w", err)
			}
		}
		if err := s.runs.Enqueue(ctx, tx, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

// Prompt is the trigger message of a run of t: the task and Instruction.
func Prompt(t dbsqlc.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\n", t.Title)
	fmt.Fprintf(&b, "Type: %s. Priority: %s. Complexity: %s.\n", t.Type, t.Priority, t.Complexity)
	if len(t.Tags) > 0 {
		fmt.Fprintf(&b, "Tags: %s\n", strings.Join(t.Tags, ", "))
	}
	if t.Description != nil {
		fmt.Fprintf(&b, "\nDescription:\n%s\n", *t.Description)
	}
	if t.AcceptanceCriteria != nil {
		fmt.Fprintf(&b, "\nAcceptance criteria:\n%s\n", *t.AcceptanceCriteria)
	}
	b.WriteString("\n" + Instruction)
	return b.String()
}

// project returns the project id names, or the tenant's default project for uuid.Nil; a
// missing project (or another tenant's) is NOT_FOUND.
func (s *Service) project(ctx context.Context, tx *db.Tx, tenantID, id uuid.UUID) (dbsqlc.Project, error) {
	var p dbsqlc.Project
	var err error
	if id == uuid.Nil {
		p, err = tx.Q.ProjectGetDefault(ctx, tenantID)
	} else {
		p, err = tx.Q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: tenantID, ID: id})
	}
	if db.IsNoRows(err) {
		return p, apperr.NotFoundf("project")
	}
	return p, err
}

func checkTitle(title string) (string, error) {
	t := strings.TrimSpace(title)
	switch {
	case !utf8.ValidString(t):
		return "", apperr.Invalid("title", "must be valid UTF-8")
	case t == "":
		return "", apperr.Invalid("title", "must not be empty")
	case utf8.RuneCountInString(t) > MaxTitleChars:
		return "", apperr.Invalid("title", "must be at most %d characters", MaxTitleChars)
	case strings.ContainsFunc(t, unicode.IsControl):
		return "", apperr.Invalid("title", "must not contain control characters")
	}
	return t, nil
}

// checkText validates a description or acceptance criteria; empty (after trimming) is none.
func checkText(field, s string) (*string, error) {
	t := strings.TrimSpace(s)
	switch {
	case !utf8.ValidString(t):
		return nil, apperr.Invalid(field, "must be valid UTF-8")
	case t == "":
		return nil, nil
	case utf8.RuneCountInString(t) > MaxTextChars:
		return nil, apperr.Invalid(field, "must be at most %d characters", MaxTextChars)
	case strings.ContainsRune(t, 0):
		return nil, apperr.Invalid(field, "must not contain NUL characters")
	}
	return &t, nil
}

// checkTags trims the tags and drops repeats (in order). It never returns nil.
func checkTags(tags []string) ([]string, error) {
	out := []string{}
	for _, tag := range tags {
		t := strings.TrimSpace(tag)
		switch {
		case !utf8.ValidString(t):
			return nil, apperr.Invalid("tags", "must be valid UTF-8")
		case t == "":
			return nil, apperr.Invalid("tags", "must not contain an empty tag")
		case utf8.RuneCountInString(t) > MaxTagChars:
			return nil, apperr.Invalid("tags", "each tag must be at most %d characters", MaxTagChars)
		case strings.ContainsFunc(t, unicode.IsControl):
			return nil, apperr.Invalid("tags", "must not contain control characters")
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > MaxTags {
		return nil, apperr.Invalid("tags", "must be at most %d tags", MaxTags)
	}
	return out, nil
}

// checkEnum returns v when it is one of values, def when v is empty and def is not.
func checkEnum(field, v, def string, values []string) (string, error) {
	if v == "" && def != "" {
		return def, nil
	}
	if !slices.Contains(values, v) {
		return "", apperr.Invalid(field, "must be one of %s", strings.Join(values, ", "))
	}
	return v, nil
}

// orEmpty maps "no text" to the empty string, which TaskUpdate stores as NULL.
func orEmpty(s *string) *string {
	if s == nil {
		e := ""
		return &e
	}
	return s
}
