// Package routine is agentry's workflows: roles (who works a step: prompts, model, tools,
// colour), routines (a graph of AGENT, GATE, CRON, LAMBDA and terminal steps with a trigger),
// and routine runs (runs of kind ROUTINE that walk the graph, each AGENT and GATE step
// execution and each CRON evaluation a run of the executor, with a RoutineContext persisted
// after every step and durable routine and step events). See ARCHITECTURE.md.
package routine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/run"
)

// Step types.
const (
	StepAgent        = "AGENT"
	StepGate         = "GATE"
	StepCron         = "CRON"
	StepLambda       = "LAMBDA"
	StepTerminal     = "TERMINAL"
	StepTerminalFail = "TERMINAL_FAIL"
)

// Edge conditions.
const (
	Always = "ALWAYS"
	OnPass = "ON_PASS"
	OnFail = "ON_FAIL"
)

// Triggers.
const (
	TriggerManual    = "MANUAL"
	TriggerTaskReady = "TASK_READY"
	TriggerCron      = "CRON"
)

// The values of the enumerations, as GraphQL spells them.
var (
	StepTypes  = []string{StepAgent, StepGate, StepCron, StepLambda, StepTerminal, StepTerminalFail}
	Conditions = []string{Always, OnPass, OnFail}
	Triggers   = []string{TriggerManual, TriggerTaskReady, TriggerCron}
	Phases     = []string{"IMPLEMENTATION", "REVIEW", "TESTING"}
	// TemplateNames are a role's templates: prompts, then output templates.
	TemplateNames = []string{"task_task", "chat_task", "gate_eval", "cron_task", "agent_done", "gate_pass", "gate_fail"}
)

// Defaults.
const (
	DefaultMaxRetries   = 3
	MaxMaxRetries       = 20
	DefaultCronInterval = 60 * time.Second
	DefaultCronTimeout  = 24 * time.Hour
	MaxSteps            = 100
)

// Palette holds the 16 colours roles are given: a new role without a colour takes the one
// farthest from the colours the tenant's roles use.
var Palette = []string{
	"#E6194B", "#3CB44B", "#FFE119", "#4363D8", "#F58231", "#911EB4", "#42D4F4", "#F032E6",
	"#BFEF45", "#FABED4", "#469990", "#DCBEFF", "#9A6324", "#800000", "#000075", "#A9A9A9",
}

// Step is one step of a routine as saved (JSON in routines.steps).
type Step struct {
	Key    string         `json:"key"`
	Name   string         `json:"name"`
	Type   string         `json:"type"`
	RoleID string         `json:"roleId,omitempty"`
	Phase  string         `json:"phase,omitempty"`
	Config map[string]any `json:"config,omitempty"`
	Entry  bool           `json:"entry,omitempty"`
}

// Edge joins two steps by key (JSON in routines.edges).
type Edge struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Condition string `json:"condition"`
}

// RoleInput is a role as createRole and updateRole take it. Color "" takes a palette colour.
type RoleInput struct {
	Name            string
	Color           string
	SystemPrompt    string
	DeveloperPrompt string
	Model           string
	Templates       map[string]string
	// Tools nil offers every tool; otherwise only these.
	Tools []string
}

// SaveInput is a routine as saveRoutine takes it; ID uuid.Nil makes a new one.
type SaveInput struct {
	ID          uuid.UUID
	Name        string
	Description string
	Trigger     string
	Cron        string
	Timezone    string
	Active      *bool
	MaxRetries  *int
	ProjectID   uuid.UUID
	Steps       []Step
	Edges       []Edge
}

// Models resolves model references (a role's model is checked when it is saved).
type Models interface {
	Resolve(ref string) error
	Default() string
}

// Service is the routine domain.
type Service struct {
	db     *db.DB
	runs   *run.Service
	models Models
	log    *slog.Logger
	lambda Lambda
	jobs   Inserter
	admit  Admission
	now    func() time.Time
	// toolNames lists the tools a role may name.
	toolNames func() []string
}

// NewService returns the routine service.
func NewService(d *db.DB, runs *run.Service, models Models, toolNames func() []string, log *slog.Logger, options ...Option) *Service {
	s := &Service{db: d, runs: runs, models: models, toolNames: toolNames, log: log}
	for _, o := range options {
		o(s)
	}
	return s
}

// Admission refuses a new run that no budget can pay for (usage.Service implements it).
type Admission interface {
	Admit(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) error
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithAdmission connects budget admission (without: every run is admitted).
func WithAdmission(a Admission) Option { return func(s *Service) { s.admit = a } }

// WithLambda replaces the lambda runner's limits.
func WithLambda(l Lambda) Option { return func(s *Service) { s.lambda = l } }

// SetClock replaces the clock of the cron scheduler of a running process: tests move time while
// the scheduler runs, which a constructor option cannot do.
func (s *Service) SetClock(now func() time.Time) { s.now = now }

func (s *Service) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// ---- roles

// Roles lists the tenant's roles by name. VIEWER or higher.
func (s *Service) Roles(ctx context.Context) ([]dbsqlc.Role, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Role
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RoleList(ctx, a.TenantID)
		return err
	})
	return out, err
}

// Role returns one of the tenant's roles; another tenant's is NOT_FOUND. VIEWER or higher.
func (s *Service) Role(ctx context.Context, id uuid.UUID) (dbsqlc.Role, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Role{}, err
	}
	var out dbsqlc.Role
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RoleGet(ctx, dbsqlc.RoleGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("role")
	}
	return out, err
}

// SaveRole creates a role (id uuid.Nil) or replaces one. MEMBER or higher. Every problem of the
// input is listed in one BAD_USER_INPUT error; a name in use is CONFLICT.
func (s *Service) SaveRole(ctx context.Context, id uuid.UUID, in RoleInput) (dbsqlc.Role, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Role{}, err
	}
	var problems []string
	name := strings.TrimSpace(in.Name)
	if name == "" || utf8.RuneCountInString(name) > 100 {
		problems = append(problems, "name: must be 1 to 100 characters")
	}
	color := strings.ToUpper(strings.TrimSpace(in.Color))
	if color != "" && !validColor(color) {
		problems = append(problems, "color: must be #RRGGBB")
	}
	if strings.TrimSpace(in.SystemPrompt) == "" {
		problems = append(problems, "systemPrompt: is required")
	}
	if utf8.RuneCountInString(in.SystemPrompt) > 50000 || utf8.RuneCountInString(in.DeveloperPrompt) > 50000 {
		problems = append(problems, "prompts: must be at most 50000 characters")
	}
	model := strings.TrimSpace(in.Model)
	if model != "" && s.models != nil {
		if err := s.models.Resolve(model); err != nil {
			problems = append(problems, fmt.Sprintf("model: %v", err))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(in.Templates)) {
		v := in.Templates[k]
		if !slices.Contains(TemplateNames, k) {
			problems = append(problems, fmt.Sprintf("templates.%s: unknown template (known: %s)", k, strings.Join(TemplateNames, ", ")))
			continue
		}
		var extra []string
		if k == "agent_done" || k == "gate_pass" || k == "gate_fail" {
			extra = []string{"output"}
		}
		for _, p := range CheckTemplate(v, extra...) {
			problems = append(problems, fmt.Sprintf("templates.%s: %s", k, p))
		}
	}
	if in.Tools != nil && s.toolNames != nil {
		known := s.toolNames()
		for _, t := range in.Tools {
			if !slices.Contains(known, t) {
				problems = append(problems, fmt.Sprintf("tools: unknown tool %q", t))
			}
		}
	}
	if len(problems) > 0 {
		return dbsqlc.Role{}, invalid("role", problems)
	}
	templates, err := json.Marshal(orEmptyMap(in.Templates))
	if err != nil {
		return dbsqlc.Role{}, err
	}
	var out dbsqlc.Role
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		if color == "" {
			if err := tx.Q.RoleLockTenant(ctx, a.TenantID); err != nil {
				return err
			}
			used, err := tx.Q.RoleColors(ctx, a.TenantID)
			if err != nil {
				return err
			}
			if id != uuid.Nil {
				if old, err := tx.Q.RoleGet(ctx, dbsqlc.RoleGetParams{TenantID: a.TenantID, ID: id}); err == nil {
					color = old.Color // an update without a colour keeps its own
				}
			}
			if color == "" {
				color = FarthestColor(used)
			}
		}
		if id == uuid.Nil {
			out, err = tx.Q.RoleInsert(ctx, dbsqlc.RoleInsertParams{
				TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), Name: name, Color: color, SystemPrompt: in.SystemPrompt,
				DeveloperPrompt: nilIfEmpty(in.DeveloperPrompt), Model: nilIfEmpty(model), Templates: templates, Tools: in.Tools,
			})
		} else {
			out, err = tx.Q.RoleUpdate(ctx, dbsqlc.RoleUpdateParams{
				TenantID: a.TenantID, ID: id, Name: name, Color: color, SystemPrompt: in.SystemPrompt,
				DeveloperPrompt: nilIfEmpty(in.DeveloperPrompt), Model: nilIfEmpty(model), Templates: templates, Tools: in.Tools,
			})
		}
		return err
	})
	switch {
	case db.IsNoRows(err):
		return out, apperr.NotFoundf("role")
	case db.IsUniqueViolation(err, "roles_name_key"):
		return out, apperr.New(apperr.Conflict, "a role named %q exists already", name)
	}
	return out, err
}

// DeleteRole deletes a role that no routine names (else CONFLICT naming them). MEMBER or higher.
func (s *Service) DeleteRole(ctx context.Context, id uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		users, err := tx.Q.RoleUsedBy(ctx, dbsqlc.RoleUsedByParams{TenantID: a.TenantID, RoleID: id})
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return apperr.New(apperr.Conflict, "the role is used by routines: %s", strings.Join(users, ", "))
		}
		n, err := tx.Q.RoleDelete(ctx, dbsqlc.RoleDeleteParams{TenantID: a.TenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.NotFoundf("role")
		}
		return nil
	})
}

// FarthestColor is the palette colour farthest (in RGB) from every colour in used; the first
// unused one in palette order breaks ties.
func FarthestColor(used []string) string {
	best, bestDist := Palette[0], -1.0
	for _, c := range Palette {
		d := math.Inf(1)
		for _, u := range used {
			d = min(d, colorDistance(c, u))
		}
		if d > bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func colorDistance(a, b string) float64 {
	var ra, ga, ba, rb, gb, bb int
	_, _ = fmt.Sscanf(strings.ToUpper(a), "#%02X%02X%02X", &ra, &ga, &ba)
	_, _ = fmt.Sscanf(strings.ToUpper(b), "#%02X%02X%02X", &rb, &gb, &bb)
	dr, dg, db := float64(ra-rb), float64(ga-gb), float64(ba-bb)
	return math.Sqrt(dr*dr + dg*dg + db*db)
}

func validColor(c string) bool {
	if len(c) != 7 || c[0] != '#' {
		return false
	}
	for _, r := range c[1:] {
		if !strings.ContainsRune("0123456789ABCDEF", r) {
			return false
		}
	}
	return true
}

// ---- routines

// Routines lists the tenant's routines (of one project when projectID is not uuid.Nil). VIEWER
// or higher.
func (s *Service) Routines(ctx context.Context, projectID uuid.UUID) ([]dbsqlc.Routine, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Routine
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RoutineList(ctx, dbsqlc.RoutineListParams{TenantID: a.TenantID, ProjectID: uuid.NullUUID{UUID: projectID, Valid: projectID != uuid.Nil}})
		return err
	})
	return out, err
}

// Routine returns one of the tenant's routines; another tenant's is NOT_FOUND.
func (s *Service) Routine(ctx context.Context, id uuid.UUID) (dbsqlc.Routine, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Routine{}, err
	}
	var out dbsqlc.Routine
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.RoutineGet(ctx, dbsqlc.RoutineGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("routine")
	}
	return out, err
}

// DeleteRoutine deletes a routine; its runs, their contexts and step results stay (with the
// definition they ran). MEMBER or higher.
func (s *Service) DeleteRoutine(ctx context.Context, id uuid.UUID) error {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		n, err := tx.Q.RoutineDelete(ctx, dbsqlc.RoutineDeleteParams{TenantID: a.TenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.NotFoundf("routine")
		}
		return nil
	})
}

// Save validates and stores a routine. Every problem of the input and of its graph is listed in
// one BAD_USER_INPUT error, and then nothing is stored. MEMBER or higher.
func (s *Service) Save(ctx context.Context, in SaveInput) (dbsqlc.Routine, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Routine{}, err
	}
	var out dbsqlc.Routine
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var project dbsqlc.Project
		var err error
		if in.ProjectID == uuid.Nil {
			project, err = tx.Q.ProjectGetDefault(ctx, a.TenantID)
		} else {
			project, err = tx.Q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: a.TenantID, ID: in.ProjectID})
		}
		if db.IsNoRows(err) {
			return apperr.NotFoundf("project")
		}
		if err != nil {
			return err
		}
		roles, err := tx.Q.RoleList(ctx, a.TenantID)
		if err != nil {
			return err
		}
		byID := map[string]dbsqlc.Role{}
		for _, r := range roles {
			byID[r.ID.String()] = r
		}
		problems := validateRoutine(&in, byID)
		if len(problems) > 0 {
			return invalid("routine", problems)
		}
		steps, err := json.Marshal(in.Steps)
		if err != nil {
			return err
		}
		edges, err := json.Marshal(in.Edges)
		if err != nil {
			return err
		}
		active := in.Active == nil || *in.Active
		maxRetries := DefaultMaxRetries
		if in.MaxRetries != nil {
			maxRetries = *in.MaxRetries
		}
		var next *time.Time
		if in.Trigger == TriggerCron && active {
			n, err := NextFire(in.Cron, in.Timezone, s.clock())
			if err != nil {
				return err
			}
			next = &n
		}
		var cronExpr, tz *string
		if in.Trigger == TriggerCron {
			cronExpr, tz = &in.Cron, &in.Timezone
		}
		if in.ID == uuid.Nil {
			out, err = tx.Q.RoutineInsert(ctx, dbsqlc.RoutineInsertParams{
				TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), ProjectID: project.ID, Name: strings.TrimSpace(in.Name),
				Description: nilIfEmpty(strings.TrimSpace(in.Description)), Trigger: in.Trigger, Cron: cronExpr, Timezone: tz,
				Active: active, MaxRetries: int32(maxRetries), Steps: steps, Edges: edges, NextFireAt: next, CreatedBy: a.UserID,
			})
		} else {
			out, err = tx.Q.RoutineUpdate(ctx, dbsqlc.RoutineUpdateParams{
				TenantID: a.TenantID, ID: in.ID, ProjectID: project.ID, Name: strings.TrimSpace(in.Name),
				Description: nilIfEmpty(strings.TrimSpace(in.Description)), Trigger: in.Trigger, Cron: cronExpr, Timezone: tz,
				Active: active, MaxRetries: int32(maxRetries), Steps: steps, Edges: edges, NextFireAt: next,
			})
		}
		return err
	})
	switch {
	case db.IsNoRows(err):
		return out, apperr.NotFoundf("routine")
	case db.IsUniqueViolation(err, "routines_name_key"):
		return out, apperr.New(apperr.Conflict, "a routine named %q exists already", strings.TrimSpace(in.Name))
	}
	return out, err
}

// cronParser reads five-field cron expressions (minute hour day-of-month month day-of-week)
// and descriptors such as @hourly.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NextFire is the first tick of a cron expression in an IANA time zone after now.
func NextFire(expr, timezone string, now time.Time) (time.Time, error) {
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		return time.Time{}, apperr.Invalid("timezone", "unknown time zone %q", timezone)
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return time.Time{}, apperr.Invalid("cron", "%v", err)
	}
	return sched.Next(now.In(loc)).UTC(), nil
}

// DecodeSteps reads a routine's steps.
func DecodeSteps(raw []byte) []Step {
	var out []Step
	_ = json.Unmarshal(raw, &out)
	return out
}

// DecodeEdges reads a routine's edges.
func DecodeEdges(raw []byte) []Edge {
	var out []Edge
	_ = json.Unmarshal(raw, &out)
	return out
}

// DecodeTemplates reads a role's templates.
func DecodeTemplates(raw []byte) map[string]string {
	out := map[string]string{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// invalid is the one BAD_USER_INPUT error listing every problem.
func invalid(what string, problems []string) error {
	msg := fmt.Sprintf("the %s has %d problem(s): %s", what, len(problems), strings.Join(problems, "; "))
	return apperr.New(apperr.BadUserInput, "%s", msg).With("problems", problems)
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
