// Package settings holds each user's agent settings per tenant: personality, verbosity,
// approval behaviour and limits. A user who never saved settings has the defaults.
package settings

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// Settings are one user's agent settings in one tenant.
type Settings struct {
	Personality       string
	Verbosity         string
	AutoExecute       bool
	ApprovalThreshold int
	MaxTokensPerTask  int
	MaxRetries        int
	TimeoutSeconds    int
	ContextStrategy   string
	// SubagentApproval says whether a sub-agent the user's runs spawn waits for a person's
	// approval before it may start: NOT_REQUIRED (the default) or REQUIRED.
	SubagentApproval string
	// Team holds the defaults of startTeamRun's omitted fields.
	Team TeamDefaults
}

// TeamDefaults are a user's defaults for team runs (startTeamRun): iterations, wall-clock
// timeout, token budget and each phase's turn limit.
type TeamDefaults struct {
	MaxIterations     int
	TimeoutMinutes    int
	TokenBudget       int
	ArchitectMaxTurns int
	ExecutorMaxTurns  int
	ReviewerMaxTurns  int
}

// Defaults are the settings of a user who has saved none.
func Defaults() Settings {
	return Settings{
		Personality: "BALANCED", Verbosity: "NORMAL", AutoExecute: false, ApprovalThreshold: 50,
		MaxTokensPerTask: 4096, MaxRetries: 3, TimeoutSeconds: 300, ContextStrategy: "PRESERVE",
		SubagentApproval: SubagentApprovalNotRequired,
		Team:             TeamDefaults{MaxIterations: 3, TimeoutMinutes: 30, TokenBudget: 500_000, ArchitectMaxTurns: 15, ExecutorMaxTurns: 30, ReviewerMaxTurns: 15},
	}
}

// Bound is the inclusive range of an integer setting; the table's CHECK constraints match.
type Bound struct{ Min, Max int }

// Bounds of the integer settings, by GraphQL field name.
var Bounds = map[string]Bound{
	"approvalThreshold": {0, 100},
	"maxTokensPerTask":  {1024, 131072},
	"maxRetries":        {0, 10},
	"timeoutSeconds":    {30, 3600},
	// Team defaults.
	"teamMaxIterations":     {1, 10},
	"teamTimeoutMinutes":    {1, 240},
	"teamTokenBudget":       {1000, 10_000_000},
	"teamArchitectMaxTurns": {1, 100},
	"teamExecutorMaxTurns":  {1, 100},
	"teamReviewerMaxTurns":  {1, 100},
}

// Values of SubagentApproval.
const (
	SubagentApprovalNotRequired = "NOT_REQUIRED"
	SubagentApprovalRequired    = "REQUIRED"
)

var enums = map[string][]string{
	"personality":      {"PRECISE", "BALANCED", "CREATIVE", "MINIMAL"},
	"verbosity":        {"MINIMAL", "NORMAL", "VERBOSE", "DEBUG"},
	"contextStrategy":  {"COMPACT", "PRESERVE", "SUMMARIZE"},
	"subagentApproval": {SubagentApprovalNotRequired, SubagentApprovalRequired},
}

// Patch changes some settings; nil fields stay as they are.
type Patch struct {
	Personality, Verbosity, ContextStrategy, SubagentApproval       *string
	AutoExecute                                                     *bool
	ApprovalThreshold, MaxTokensPerTask, MaxRetries, TimeoutSeconds *int
	// Team defaults.
	TeamMaxIterations, TeamTimeoutMinutes, TeamTokenBudget            *int
	TeamArchitectMaxTurns, TeamExecutorMaxTurns, TeamReviewerMaxTurns *int
}

// Service reads and writes settings.
type Service struct{ db *db.DB }

// NewService returns the settings service.
func NewService(d *db.DB) *Service { return &Service{db: d} }

// Get returns the caller's settings.
func (s *Service) Get(ctx context.Context) (Settings, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return Settings{}, err
	}
	var out Settings
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = load(ctx, tx, a)
		return err
	})
	return out, err
}

// ForUser returns the settings a run of a's uses (inside a's tenant transaction).
func ForUser(ctx context.Context, tx *db.Tx, a auth.Actor) (Settings, error) { return load(ctx, tx, a) }

// ForUserID returns the settings of user userID of tenantID (inside the tenant's transaction):
// a worker reads a run's user's settings this way.
func ForUserID(ctx context.Context, tx *db.Tx, tenantID, userID uuid.UUID) (Settings, error) {
	return loaded(tx.Q.AgentSettingsGet(ctx, dbsqlc.AgentSettingsGetParams{TenantID: tenantID, UserID: userID}))
}

func load(ctx context.Context, tx *db.Tx, a auth.Actor) (Settings, error) {
	return loaded(tx.Q.AgentSettingsGet(ctx, dbsqlc.AgentSettingsGetParams{TenantID: a.TenantID, UserID: a.UserID}))
}

// Of is the settings of a row read in a batch (dbsqlc.QueueMaybe): the defaults when
// the user has none.
func Of(row dbsqlc.AgentSetting, found bool) Settings {
	if !found {
		return Defaults()
	}
	return fromRow(row)
}

// loaded is the settings of a row read (the defaults when there is none).
func loaded(row dbsqlc.AgentSetting, err error) (Settings, error) {
	if db.IsNoRows(err) {
		return Defaults(), nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("load settings: %w", err)
	}
	return fromRow(row), nil
}

// Update validates p and applies it to the caller's settings. MEMBER or higher. An invalid field
// is BAD_USER_INPUT naming the field and its range; nothing is changed then.
func (s *Service) Update(ctx context.Context, p Patch) (Settings, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return Settings{}, err
	}
	if err := p.Validate(); err != nil {
		return Settings{}, err
	}
	var out Settings
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		cur, err := load(ctx, tx, a)
		if err != nil {
			return err
		}
		p.apply(&cur)
		row, err := tx.Q.AgentSettingsUpsert(ctx, dbsqlc.AgentSettingsUpsertParams{
			TenantID: a.TenantID, UserID: a.UserID, Personality: cur.Personality, Verbosity: cur.Verbosity,
			AutoExecute: cur.AutoExecute, ApprovalThreshold: int32(cur.ApprovalThreshold),
			MaxTokensPerTask: int32(cur.MaxTokensPerTask), MaxRetries: int32(cur.MaxRetries),
			TimeoutSeconds: int32(cur.TimeoutSeconds), ContextStrategy: cur.ContextStrategy,
			TeamMaxIterations: int32(cur.Team.MaxIterations), TeamTimeoutMinutes: int32(cur.Team.TimeoutMinutes),
			TeamTokenBudget: int32(cur.Team.TokenBudget), TeamArchitectMaxTurns: int32(cur.Team.ArchitectMaxTurns),
			TeamExecutorMaxTurns: int32(cur.Team.ExecutorMaxTurns), TeamReviewerMaxTurns: int32(cur.Team.ReviewerMaxTurns),
			SubagentApproval: cur.SubagentApproval,
		})
		if name, ok := db.IsCheckViolation(err); ok {
			return apperr.New(apperr.BadUserInput, "settings out of range (%s)", name)
		}
		if err != nil {
			return fmt.Errorf("save settings: %w", err)
		}
		out = fromRow(row)
		return nil
	})
	return out, err
}

// Validate checks every field of p that is set.
func (p Patch) Validate() error {
	ints := []struct {
		name string
		v    *int
	}{{"approvalThreshold", p.ApprovalThreshold}, {"maxTokensPerTask", p.MaxTokensPerTask}, {"maxRetries", p.MaxRetries}, {"timeoutSeconds", p.TimeoutSeconds},
		{"teamMaxIterations", p.TeamMaxIterations}, {"teamTimeoutMinutes", p.TeamTimeoutMinutes}, {"teamTokenBudget", p.TeamTokenBudget},
		{"teamArchitectMaxTurns", p.TeamArchitectMaxTurns}, {"teamExecutorMaxTurns", p.TeamExecutorMaxTurns}, {"teamReviewerMaxTurns", p.TeamReviewerMaxTurns}}
	for _, f := range ints {
		if f.v == nil {
			continue
		}
		b := Bounds[f.name]
		if *f.v < b.Min || *f.v > b.Max {
			return apperr.Invalid(f.name, "must be between %d and %d (got %d)", b.Min, b.Max, *f.v).With("min", b.Min).With("max", b.Max)
		}
	}
	strs := []struct {
		name string
		v    *string
	}{{"personality", p.Personality}, {"verbosity", p.Verbosity}, {"contextStrategy", p.ContextStrategy}, {"subagentApproval", p.SubagentApproval}}
	for _, f := range strs {
		if f.v == nil {
			continue
		}
		if !slices.Contains(enums[f.name], *f.v) {
			return apperr.Invalid(f.name, "must be one of %v", enums[f.name])
		}
	}
	return nil
}

func (p Patch) apply(s *Settings) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	seti := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Personality, p.Personality)
	set(&s.Verbosity, p.Verbosity)
	set(&s.ContextStrategy, p.ContextStrategy)
	set(&s.SubagentApproval, p.SubagentApproval)
	if p.AutoExecute != nil {
		s.AutoExecute = *p.AutoExecute
	}
	seti(&s.ApprovalThreshold, p.ApprovalThreshold)
	seti(&s.MaxTokensPerTask, p.MaxTokensPerTask)
	seti(&s.MaxRetries, p.MaxRetries)
	seti(&s.TimeoutSeconds, p.TimeoutSeconds)
	seti(&s.Team.MaxIterations, p.TeamMaxIterations)
	seti(&s.Team.TimeoutMinutes, p.TeamTimeoutMinutes)
	seti(&s.Team.TokenBudget, p.TeamTokenBudget)
	seti(&s.Team.ArchitectMaxTurns, p.TeamArchitectMaxTurns)
	seti(&s.Team.ExecutorMaxTurns, p.TeamExecutorMaxTurns)
	seti(&s.Team.ReviewerMaxTurns, p.TeamReviewerMaxTurns)
}

func fromRow(r dbsqlc.AgentSetting) Settings {
	return Settings{
		Personality: r.Personality, Verbosity: r.Verbosity, AutoExecute: r.AutoExecute,
		ApprovalThreshold: int(r.ApprovalThreshold), MaxTokensPerTask: int(r.MaxTokensPerTask),
		MaxRetries: int(r.MaxRetries), TimeoutSeconds: int(r.TimeoutSeconds), ContextStrategy: r.ContextStrategy,
		SubagentApproval: r.SubagentApproval,
		Team: TeamDefaults{
			MaxIterations: int(r.TeamMaxIterations), TimeoutMinutes: int(r.TeamTimeoutMinutes), TokenBudget: int(r.TeamTokenBudget),
			ArchitectMaxTurns: int(r.TeamArchitectMaxTurns), ExecutorMaxTurns: int(r.TeamExecutorMaxTurns), ReviewerMaxTurns: int(r.TeamReviewerMaxTurns),
		},
	}
}
