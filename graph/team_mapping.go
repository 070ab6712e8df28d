package graph

import (
	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/team"
)

// startTeamInput maps startTeamRun's input to the team service's.
func startTeamInput(in model.StartTeamRunInput) (team.StartInput, error) {
	var out team.StartInput
	var err error
	if in.ConversationID != nil {
		if out.ConversationID, err = model.DecodeID("Conversation", *in.ConversationID); err != nil {
			return out, err
		}
	}
	if in.TaskID != nil {
		if out.TaskID, err = model.DecodeID("Task", *in.TaskID); err != nil {
			return out, err
		}
	}
	out.Goal = deref(in.Goal)
	out.MaxIterations, out.TimeoutMinutes, out.TokenBudget = in.MaxIterations, in.TimeoutMinutes, in.TokenBudget
	out.Architect, out.Executor, out.Reviewer = phaseInput(in.Architect), phaseInput(in.Executor), phaseInput(in.Reviewer)
	return out, nil
}

func phaseInput(in *model.TeamPhaseInput) team.PhaseInput {
	if in == nil {
		return team.PhaseInput{}
	}
	return team.PhaseInput{Model: deref(in.Model), MaxTurns: in.MaxTurns}
}

// teamReview is a phase's verdict (nil: none).
func teamReview(p dbsqlc.TeamPhase) *model.TeamReview {
	v := team.VerdictOf(p)
	if v == nil {
		return nil
	}
	out := &model.TeamReview{Verdict: model.ReviewVerdict(v.Verdict), Summary: v.Summary, Iteration: int(p.Iteration), Issues: []*model.ReviewIssue{}}
	for _, is := range v.Issues {
		ri := &model.ReviewIssue{Problem: is.Problem}
		if is.File != "" {
			f := is.File
			ri.File = &f
		}
		if is.Suggestion != "" {
			sg := is.Suggestion
			ri.Suggestion = &sg
		}
		out.Issues = append(out.Issues, ri)
	}
	return out
}
