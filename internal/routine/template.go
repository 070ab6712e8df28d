package routine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/osteele/liquid"
)

// Context is the RoutineContext: made when a routine run starts, persisted after every step,
// handed to templates (as Liquid variables named by the JSON keys) and to lambda scripts.
type Context struct {
	RoutineID      string                `json:"routine_id"`
	RoutineName    string                `json:"routine_name"`
	ProjectID      string                `json:"project_id"`
	Project        ProjectInfo           `json:"project"`
	Input          string                `json:"input"`
	MaxRetries     int                   `json:"max_retries"`
	StepResults    map[string]StepResult `json:"step_results"`
	ExecutionRunID string                `json:"execution_run_id"`
	TaskID         string                `json:"task_id"`
	IsCronTrigger  bool                  `json:"is_cron_trigger"`
	Task           TaskInfo              `json:"task"`
	Step           StepInfo              `json:"step"`
	// GateFeedback is the output of the last GATE, CRON or LAMBDA step that failed, for the
	// next agent step (reached through ON_FAIL); TaskSource names that step's role.
	GateFeedback string  `json:"gate_feedback"`
	TaskSource   string  `json:"task_source"`
	Git          GitInfo `json:"git"`
}

// ProjectInfo is the routine's project in the context.
type ProjectInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// TaskInfo is the metadata of the task a routine run works on (empty without one).
type TaskInfo struct {
	Title              string   `json:"title"`
	Description        string   `json:"description"`
	AcceptanceCriteria string   `json:"acceptance_criteria"`
	Tags               []string `json:"tags"`
	Source             string   `json:"source"`
	Status             string   `json:"status"`
	Priority           string   `json:"priority"`
	Type               string   `json:"type"`
	Slug               string   `json:"slug"`
	Complexity         string   `json:"complexity"`
}

// StepInfo is the step being worked.
type StepInfo struct {
	Name     string         `json:"name"`
	Metadata map[string]any `json:"metadata"`
}

// GitInfo names the project's repository; empty until projects are backed by git.
type GitInfo struct {
	Branch       string `json:"branch"`
	TargetBranch string `json:"target_branch"`
	WorkDir      string `json:"work_dir"`
	RepoURL      string `json:"repo_url"`
}

// StepResult is what one execution of a step gave.
type StepResult struct {
	StepID         string         `json:"step_id"`
	StepName       string         `json:"step_name"`
	Passed         bool           `json:"passed"`
	Output         string         `json:"output"`
	Data           map[string]any `json:"data"`
	InputTokens    int64          `json:"input_tokens"`
	OutputTokens   int64          `json:"output_tokens"`
	ExecutionCount int            `json:"execution_count"`
	DurationMs     int64          `json:"duration_ms"`
}

// Bindings is the context as template variables (the JSON keys). Empty strings are nil, so
// that {% if gate_feedback %} is false without feedback (Liquid holds "" true).
func (c Context) Bindings() map[string]any {
	b, _ := json.Marshal(c)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	blank(m)
	return m
}

func blank(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case string:
			if x == "" {
				m[k] = nil
			}
		case map[string]any:
			blank(x)
		}
	}
}

// sampleNow is the instant cron expressions are tried against when they are checked.
var sampleNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sampleContext has every field set, so that a strict render finds only unknown names.
func sampleContext() Context {
	return Context{
		RoutineID: "r", RoutineName: "n", ProjectID: "p", Project: ProjectInfo{"p", "d"}, Input: "i", MaxRetries: 3,
		StepResults:    map[string]StepResult{"step": {StepID: "step", StepName: "s", Passed: true, Output: "o", Data: map[string]any{"k": "v"}}},
		ExecutionRunID: "x", TaskID: "t", IsCronTrigger: true,
		Task: TaskInfo{"t", "d", "a", []string{"x"}, "user", "OPEN", "MEDIUM", "TASK", "s", "STANDARD"},
		Step: StepInfo{"s", map[string]any{"k": "v"}}, GateFeedback: "g", TaskSource: "r",
		Git: GitInfo{"b", "t", "w", "u"},
	}
}

var engine = liquid.NewEngine()

// Render renders a Liquid template with the context (and extra variables, such as an output
// template's "output"). A variable that has no value renders empty.
func Render(tmpl string, c Context, extra map[string]any) (string, error) {
	b := c.Bindings()
	for k, v := range extra {
		b[k] = v
	}
	out, err := engine.ParseAndRenderString(tmpl, b)
	if err != nil {
		return "", fmt.Errorf("template: %s", err.Error())
	}
	return out, nil
}

var (
	tagRE    = regexp.MustCompile(`(?s)\{%-?\s*(if|elsif|unless|case|when|for|assign|capture|tablerow|cycle)\b(.*?)-?%\}`)
	outRE    = regexp.MustCompile(`(?s)\{\{-?(.*?)-?\}\}`)
	stringRE = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	identRE  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[[^\]]*\])*`)
	// words that are Liquid's own in tag expressions, not variables.
	liquidWords = []string{"and", "or", "not", "contains", "in", "true", "false", "nil", "null", "empty", "blank", "limit", "offset", "reversed", "with", "as", "cols"}
)

// CheckTemplate reports the problems of a template: its syntax, and every variable that the
// RoutineContext (with extra names) does not have, in output tags and in tag expressions alike.
// (Checked when a role or routine is saved, so that a misspelt name is refused then rather than
// rendered blank at run time.)
func CheckTemplate(tmpl string, extra ...string) []string {
	if strings.TrimSpace(tmpl) == "" {
		return nil
	}
	if _, err := engine.ParseString(tmpl); err != nil {
		return []string{err.Error()}
	}
	b := sampleContext().Bindings()
	for _, e := range extra {
		b[e] = "x"
	}
	local := map[string]bool{"forloop": true, "tablerowloop": true}
	var problems []string
	check := func(expr string) {
		for _, n := range identRE.FindAllString(stringRE.ReplaceAllString(expr, ""), -1) {
			n = strings.Split(n, "[")[0]
			if slices.Contains(liquidWords, n) || local[strings.Split(n, ".")[0]] {
				continue
			}
			if !known(b, n) {
				problems = append(problems, fmt.Sprintf("unknown variable %q", n))
			}
		}
	}
	// filters: "| name: args" -> args only
	filterExpr := func(expr string) string {
		parts := strings.Split(stringRE.ReplaceAllString(expr, `""`), "|")
		out := parts[0]
		for _, f := range parts[1:] {
			if i := strings.Index(f, ":"); i >= 0 {
				out += " " + f[i+1:]
			}
		}
		return out
	}
	for _, m := range tagRE.FindAllStringSubmatch(tmpl, -1) {
		expr := filterExpr(m[2])
		if m[1] == "for" || m[1] == "assign" || m[1] == "capture" || m[1] == "tablerow" {
			names := identRE.FindAllString(expr, 1)
			if len(names) > 0 {
				local[names[0]] = true
				expr = strings.Replace(expr, names[0], "", 1)
			}
		}
		check(expr)
	}
	for _, m := range outRE.FindAllStringSubmatch(tmpl, -1) {
		check(filterExpr(m[1]))
	}
	return dedupe(problems)
}

// known reports whether a dotted name resolves in the bindings (a step_results key or a
// metadata key are open-ended: any name below them is accepted).
func known(b map[string]any, name string) bool {
	parts := strings.Split(name, ".")
	var cur any = b
	for i, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			// a list's size/first/last, or below an open-ended map
			return i > 0 && slices.Contains([]string{"size", "first", "last"}, p)
		}
		v, ok := m[p]
		if !ok {
			return i > 0 && (parts[i-1] == "step_results" || parts[i-1] == "metadata" || parts[i-1] == "data" || isOpenBelow(parts[:i]))
		}
		cur = v
	}
	return true
}

func isOpenBelow(prefix []string) bool {
	return len(prefix) >= 2 && prefix[len(prefix)-2] == "step_results"
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
