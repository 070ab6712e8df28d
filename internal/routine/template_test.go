package routine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every RoutineContext field renders, as users write templates.
func TestTemplatesRenderEveryContextField(t *testing.T) {
	t.Parallel()
	c := Context{
		RoutineID: "rt-1", RoutineName: "Feature flow", ProjectID: "pr-1",
		Project: ProjectInfo{Name: "Shop", Description: "the web shop"}, Input: "please hurry", MaxRetries: 3,
		StepResults: map[string]StepResult{"impl": {StepID: "impl", StepName: "Implementation", Passed: true, Output: "implemented",
			Data: map[string]any{"files": 2}, InputTokens: 100, OutputTokens: 20, ExecutionCount: 2, DurationMs: 1500}},
		ExecutionRunID: "run-1", TaskID: "task-1", IsCronTrigger: true,
		Task: TaskInfo{Title: "Add export", Description: "CSV export", AcceptanceCriteria: "a button", Tags: []string{"ui", "csv"},
			Source: "user", Status: "IN_PROGRESS", Priority: "HIGH", Type: "FEATURE", Slug: "add-export", Complexity: "COMPLEX"},
		Step: StepInfo{Name: "Review", Metadata: map[string]any{"suite": "unit"}}, GateFeedback: "add tests", TaskSource: "Reviewer",
		Git: GitInfo{Branch: "feature/export", TargetBranch: "main", WorkDir: "/work/shop", RepoURL: "https://git.example/shop"},
	}
	cases := []struct{ tmpl, want string }{
		{"{{ routine_id }}", "rt-1"},
		{"{{ routine_name }}", "Feature flow"},
		{"{{ project_id }}", "pr-1"},
		{"{{ project.name }}", "Shop"},
		{"{{ project.description }}", "the web shop"},
		{"{{ input }}", "please hurry"},
		{"{{ max_retries }}", "3"},
		{"{{ step_results.impl.output }}", "implemented"},
		{"{{ step_results.impl.passed }}", "true"},
		{"{{ step_results.impl.step_name }}", "Implementation"},
		{"{{ step_results.impl.data.files }}", "2"},
		{"{{ step_results.impl.input_tokens }}/{{ step_results.impl.output_tokens }}", "100/20"},
		{"{{ step_results.impl.execution_count }}", "2"},
		{"{{ step_results.impl.duration_ms }}", "1500"},
		{"{{ execution_run_id }}", "run-1"},
		{"{{ task_id }}", "task-1"},
		{"{% if is_cron_trigger %}cron{% endif %}", "cron"},
		{"{{ task.title }}", "Add export"},
		{"{{ task.description }}", "CSV export"},
		{"{{ task.acceptance_criteria }}", "a button"},
		{"{{ task.tags | join: ', ' }}", "ui, csv"},
		{"{{ task.source }}", "user"},
		{"{{ task.status }}", "IN_PROGRESS"},
		{"{{ task.priority }}", "HIGH"},
		{"{{ task.type }}", "FEATURE"},
		{"{{ task.slug }}", "add-export"},
		{"{{ task.complexity }}", "COMPLEX"},
		{"{{ step.name }}", "Review"},
		{"{{ step.metadata.suite }}", "unit"},
		{"{{ gate_feedback }}", "add tests"},
		{"{% if gate_feedback %}Feedback from {{ task_source }}: {{ gate_feedback }}{% endif %}", "Feedback from Reviewer: add tests"},
		{"{{ task_source }}", "Reviewer"},
		{"{{ git.branch }}", "feature/export"},
		{"{{ git.target_branch }}", "main"},
		{"{{ git.work_dir }}", "/work/shop"},
		{"{{ git.repo_url }}", "https://git.example/shop"},
	}
	for _, tc := range cases {
		t.Run(tc.tmpl, func(t *testing.T) {
			require.Empty(t, CheckTemplate(tc.tmpl), "a valid template")
			got, err := Render(tc.tmpl, c, nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	// No feedback: {% if gate_feedback %} is false (Liquid holds "" true; the context's empty
	// strings are nil).
	got, err := Render("[{% if gate_feedback %}x{% endif %}]", Context{}, nil)
	require.NoError(t, err)
	require.Equal(t, "[]", got)
}

func TestCheckTemplateFindsUnknownVariables(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{`unknown variable "task.titel"`}, CheckTemplate("{{ task.titel }}"))
	require.Equal(t, []string{`unknown variable "gate_feedbak"`}, CheckTemplate("{% if gate_feedbak %}x{% endif %}"))
	require.Equal(t, []string{`unknown variable "nope"`}, CheckTemplate("{{ task.title | default: nope }}"))
	require.Empty(t, CheckTemplate("{% for tag in task.tags %}{{ tag }}{{ forloop.index }}{% endfor %}{% assign x = task.title %}{{ x }}"))
	require.Empty(t, CheckTemplate(`{% if task.status == "DONE" and gate_feedback contains "tests" %}{{ 'a' | upcase }}{% endif %}`))
	require.Empty(t, CheckTemplate("{{ output }}", "output"))
	require.NotEmpty(t, CheckTemplate("{{ output }}"))
	require.NotEmpty(t, CheckTemplate("{% if %}"), "a syntax error")
}
