package graph

import (
	"context"
	"encoding/json"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/routine"
)

// The helpers below map roles and routines onto the edge's types.

func roleInput(in model.RoleInput) (routine.RoleInput, error) {
	out := routine.RoleInput{Name: in.Name, Color: deref(in.Color), SystemPrompt: in.SystemPrompt,
		DeveloperPrompt: deref(in.DeveloperPrompt), Model: deref(in.Model), Tools: in.Tools}
	if len(in.Templates) > 0 && string(in.Templates) != "null" {
		if err := json.Unmarshal(in.Templates, &out.Templates); err != nil {
			return out, apperr.Invalid("templates", "must be an object of template names to Liquid text")
		}
	}
	return out, nil
}

func saveInput(in model.SaveRoutineInput) (routine.SaveInput, error) {
	out := routine.SaveInput{Name: in.Name, Description: deref(in.Description), Trigger: string(in.Trigger),
		Cron: deref(in.Cron), Timezone: deref(in.Timezone), Active: in.Active, MaxRetries: in.MaxRetries}
	var err error
	if out.ID, err = optionalID("Routine", in.ID); err != nil {
		return out, err
	}
	if out.ProjectID, err = optionalID("Project", in.ProjectID); err != nil {
		return out, err
	}
	for _, st := range in.Steps {
		s := routine.Step{Key: st.Key, Name: st.Name, Type: string(st.Type), Entry: st.Entry != nil && *st.Entry}
		if st.Phase != nil {
			s.Phase = string(*st.Phase)
		}
		if st.RoleID != nil && *st.RoleID != "" {
			id, err := model.DecodeID("RoutineRole", *st.RoleID)
			if err != nil {
				return out, apperr.Invalid("steps.roleId", "not a role id")
			}
			s.RoleID = id.String()
		}
		if len(st.Config) > 0 && string(st.Config) != "null" {
			if err := json.Unmarshal(st.Config, &s.Config); err != nil {
				return out, apperr.Invalid("steps.config", "must be a JSON object")
			}
		}
		out.Steps = append(out.Steps, s)
	}
	for _, e := range in.Edges {
		ed := routine.Edge{From: e.From, To: e.To}
		if e.Condition != nil {
			ed.Condition = string(*e.Condition)
		}
		out.Edges = append(out.Edges, ed)
	}
	return out, nil
}

func (r *Resolver) rolesByID(ctx context.Context) (map[string]dbsqlc.Role, error) {
	roles, err := r.RoutineService.Roles(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]dbsqlc.Role, len(roles))
	for _, ro := range roles {
		out[ro.ID.String()] = ro
	}
	return out, nil
}

func routineSteps(rt dbsqlc.Routine, roles map[string]dbsqlc.Role) []*model.RoutineStep {
	steps := routine.DecodeSteps(rt.Steps)
	out := make([]*model.RoutineStep, 0, len(steps))
	for _, st := range steps {
		ms := &model.RoutineStep{ID: rt.ID.String() + ":" + st.Key, Key: st.Key, Name: st.Name, Type: model.StepType(st.Type), Entry: st.Entry}
		if ro, ok := roles[st.RoleID]; ok {
			ms.Role = &model.RoutineRole{Row: ro}
		}
		if st.Phase != "" {
			p := model.RoutinePhase(st.Phase)
			ms.Phase = &p
		}
		if st.Config != nil {
			b, _ := json.Marshal(st.Config)
			ms.Config = model.JSON(b)
		}
		out = append(out, ms)
	}
	return out
}

func routineRun(info routine.RunInfo, roles map[string]dbsqlc.Role) *model.RoutineRun {
	out := &model.RoutineRun{Run: &model.Run{Row: info.Run}, RoutineID: info.RoutineID, Context: model.JSON(info.Context),
		CurrentStep: info.CurrentStep, StepResults: []*model.StepResult{}}
	for _, res := range info.Results {
		sr := &model.StepResult{StepKey: res.StepKey, StepName: res.StepName, StepType: model.StepType(res.StepType), Passed: res.Passed,
			Output: res.Output, Data: model.RawJSON(res.Data), InputTokens: res.InputTokens, OutputTokens: res.OutputTokens,
			ExecutionCount: int(res.Execution), DurationMs: int(res.DurationMs), CreatedAt: res.CreatedAt}
		if res.RoleID.Valid {
			if ro, ok := roles[res.RoleID.UUID.String()]; ok {
				sr.Role = &model.RoutineRole{Row: ro}
			}
			if ref, ok := info.Roles[res.RoleID.UUID.String()]; ok {
				c := ref.Color
				sr.RoleColor = &c
			}
		}
		out.StepResults = append(out.StepResults, sr)
	}
	m := &model.RoutineMetrics{InputTokens: info.Metrics.InputTokens, OutputTokens: info.Metrics.OutputTokens, Executions: int(info.Metrics.Executions), Steps: []*model.StepMetrics{}}
	for _, s := range info.Metrics.Steps {
		m.Steps = append(m.Steps, &model.StepMetrics{StepKey: s.StepKey, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, Executions: int(s.Executions)})
	}
	out.Metrics = m
	return out
}
