package team

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// systemPrompt is a phase's system prompt (its conversation's).
func systemPrompt(phase string) string {
	switch phase {
	case PhaseArchitect:
		return "You are the Architect of a team of agents (Architect, Executor, Reviewer). Read what you need of the project's workspace with the read-only tools, then answer with a concise, numbered implementation plan for the Executor and no tool call. You cannot change files."
	case PhaseExecutor:
		return "You are the Executor of a team of agents (Architect, Executor, Reviewer). Implement the Architect's plan in the project's workspace with the tools. When you are done, answer with a short summary of what you changed and no tool call."
	}
	return "You are the Reviewer of a team of agents (Architect, Executor, Reviewer). Judge whether the Executor's changes meet the goal and follow the plan. You may read the workspace with the read-only tools; you cannot change files. Give your verdict by calling submit_review once: APPROVE when the goal is met, REQUEST_CHANGES with the issues to fix, BLOCK when the goal cannot be reached without a person. Then answer with one short sentence and no tool call."
}

func architectPrompt(tr dbsqlc.TeamRun) string {
	return "Goal:\n" + tr.Goal + "\n\nWrite the plan."
}

func executorPrompt(tr dbsqlc.TeamRun, iteration int, review *Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Goal:\n%s\n\nPlan:\n%s\n", tr.Goal, planOf(tr))
	if review == nil {
		b.WriteString("\nImplement the plan.")
		return b.String()
	}
	fmt.Fprintf(&b, "\nIteration %d. The reviewer requested changes to your previous work.\nReview summary: %s\nIssues:\n", iteration, review.Summary)
	for _, is := range review.Issues {
		b.WriteString("- ")
		if is.File != "" {
			b.WriteString(is.File + ": ")
		}
		b.WriteString(is.Problem)
		if is.Suggestion != "" {
			b.WriteString(" (suggestion: " + is.Suggestion + ")")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nFix these issues.")
	return b.String()
}

func reviewerPrompt(tr dbsqlc.TeamRun, diff string, again bool) string {
	var b strings.Builder
	if again {
		b.WriteString("Your previous review ended without a valid verdict. You must call submit_review with {verdict, summary, issues} now.\n\n")
	}
	if strings.TrimSpace(diff) == "" {
		diff = "(no workspace changes)"
	}
	fmt.Fprintf(&b, "Goal:\n%s\n\nPlan:\n%s\n\nChanges since the team run began (the workspace journal as a diff):\n%s\n\nReview the changes and call submit_review.", tr.Goal, planOf(tr), truncate(diff, 60_000))
	return b.String()
}

func planOf(tr dbsqlc.TeamRun) string {
	if tr.Plan == nil || strings.TrimSpace(*tr.Plan) == "" {
		return "(the architect gave no plan)"
	}
	return *tr.Plan
}

// Verdict is a reviewer's decision (submit_review's arguments).
type Verdict struct {
	Verdict string  `json:"verdict"`
	Summary string  `json:"summary"`
	Issues  []Issue `json:"issues"`
}

// Issue is one problem a reviewer found.
type Issue struct {
	File       string `json:"file,omitempty"`
	Problem    string `json:"problem"`
	Suggestion string `json:"suggestion,omitempty"`
}

// VerdictOf reads a phase's stored verdict (nil: none).
func VerdictOf(p dbsqlc.TeamPhase) *Verdict {
	if len(p.Verdict) == 0 {
		return nil
	}
	var v Verdict
	if err := json.Unmarshal(p.Verdict, &v); err != nil || v.Verdict == "" {
		return nil
	}
	return &v
}
