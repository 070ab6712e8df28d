package routine

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentry/agentry/internal/db/dbsqlc"
)

var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validateRoutine checks a routine and its graph and returns every problem found (none: it may
// be stored). It fills in defaults (edge conditions, the time zone). roles are the tenant's, by
// id.
func validateRoutine(in *SaveInput, roles map[string]dbsqlc.Role) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	name := strings.TrimSpace(in.Name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		add("name: must be 1 to 200 characters")
	}
	if utf8.RuneCountInString(in.Description) > 10000 {
		add("description: must be at most 10000 characters")
	}
	if !slices.Contains(Triggers, in.Trigger) {
		add("trigger: must be one of %s", strings.Join(Triggers, ", "))
	}
	if in.Trigger == TriggerCron {
		if in.Timezone == "" {
			in.Timezone = "UTC"
		}
		if strings.TrimSpace(in.Cron) == "" {
			add("cron: a CRON routine needs a cron expression")
		} else if _, err := NextFire(in.Cron, in.Timezone, sampleNow); err != nil {
			add("%s", strings.TrimPrefix(err.Error(), "BAD_USER_INPUT: "))
		}
	}
	if in.MaxRetries != nil && (*in.MaxRetries < 0 || *in.MaxRetries > MaxMaxRetries) {
		add("maxRetries: must be between 0 and %d", MaxMaxRetries)
	}
	if len(in.Steps) == 0 {
		add("steps: a routine needs steps")
	}
	if len(in.Steps) > MaxSteps {
		add("steps: at most %d", MaxSteps)
	}

	byKey := map[string]Step{}
	var entries, terminals []string
	for i := range in.Steps {
		st := &in.Steps[i]
		at := fmt.Sprintf("steps[%d]", i)
		if !keyRE.MatchString(st.Key) {
			add("%s.key: must be 1 to 64 letters, digits, _ or -", at)
		} else if _, dup := byKey[st.Key]; dup {
			add("%s.key: %q is used by two steps", at, st.Key)
		} else {
			byKey[st.Key] = *st
			at = "step " + st.Key
		}
		if strings.TrimSpace(st.Name) == "" || utf8.RuneCountInString(st.Name) > 200 {
			add("%s: name must be 1 to 200 characters", at)
		}
		if !slices.Contains(StepTypes, st.Type) {
			add("%s: type must be one of %s", at, strings.Join(StepTypes, ", "))
		}
		if st.Phase != "" && !slices.Contains(Phases, st.Phase) {
			add("%s: phase must be one of %s", at, strings.Join(Phases, ", "))
		}
		if st.Entry {
			entries = append(entries, st.Key)
		}
		var role *dbsqlc.Role
		switch st.Type {
		case StepAgent, StepGate, StepCron:
			if st.RoleID == "" {
				add("%s: a %s step needs a role", at, st.Type)
			} else if r, ok := roles[st.RoleID]; !ok {
				add("%s: role not found", at)
			} else {
				role = &r
			}
		case StepTerminal, StepTerminalFail:
			terminals = append(terminals, st.Key)
		}
		if st.Type == StepLambda {
			script, _ := st.Config["script"].(string)
			if strings.TrimSpace(script) == "" {
				add("%s: a LAMBDA step needs config.script (Starlark defining main(ctx))", at)
			} else if err := CompileScript(script); err != nil {
				add("%s: config.script: %v", at, err)
			}
		}
		if st.Type == StepCron {
			for _, k := range []string{"intervalSeconds", "timeoutSeconds"} {
				if v, ok := st.Config[k]; ok {
					if f, ok := v.(float64); !ok || f < 1 || f != float64(int64(f)) {
						add("%s: config.%s must be a whole number of seconds, at least 1", at, k)
					}
				}
			}
		}
		if p, ok := st.Config["prompt"]; ok {
			if ps, ok := p.(string); !ok {
				add("%s: config.prompt must be a string", at)
			} else {
				for _, pr := range CheckTemplate(ps) {
					add("%s: config.prompt: %s", at, pr)
				}
			}
		}
		if role != nil {
			tmpls := DecodeTemplates(role.Templates)
			for _, k := range slices.Sorted(maps.Keys(tmpls)) {
				v := tmpls[k]
				var extra []string
				if k == "agent_done" || k == "gate_pass" || k == "gate_fail" {
					extra = []string{"output"}
				}
				for _, pr := range CheckTemplate(v, extra...) {
					add("%s: role %s: templates.%s: %s", at, role.Name, k, pr)
				}
			}
		}
	}
	switch {
	case len(entries) == 0 && len(in.Steps) > 0:
		add("no entry step: mark exactly one step entry: true")
	case len(entries) > 1:
		add("%d entry steps (%s): exactly one is allowed", len(entries), strings.Join(entries, ", "))
	}
	if len(terminals) == 0 && len(in.Steps) > 0 {
		add("no terminal step: a routine needs a TERMINAL or TERMINAL_FAIL step")
	}

	out := map[string][]Edge{}
	for i := range in.Edges {
		e := &in.Edges[i]
		if e.Condition == "" {
			e.Condition = Always
		}
		at := fmt.Sprintf("edge %s -> %s", e.From, e.To)
		if !slices.Contains(Conditions, e.Condition) {
			add("%s: condition must be one of %s", at, strings.Join(Conditions, ", "))
		}
		from, okFrom := byKey[e.From]
		_, okTo := byKey[e.To]
		if !okFrom {
			add("%s: no step %q in this routine", at, e.From)
		}
		if !okTo {
			add("%s: no step %q in this routine", at, e.To)
		}
		if okFrom && (from.Type == StepTerminal || from.Type == StepTerminalFail) {
			add("%s: a terminal step has no way out", at)
		}
		if okFrom && okTo {
			out[e.From] = append(out[e.From], *e)
		}
	}

	if len(entries) == 1 {
		seen := map[string]bool{entries[0]: true}
		queue := []string{entries[0]}
		for len(queue) > 0 {
			k := queue[0]
			queue = queue[1:]
			for _, e := range out[k] {
				if !seen[e.To] {
					seen[e.To] = true
					queue = append(queue, e.To)
				}
			}
		}
		var unreachable []string
		for _, st := range in.Steps {
			if _, ok := byKey[st.Key]; ok && !seen[st.Key] {
				unreachable = append(unreachable, st.Key)
			}
		}
		if len(unreachable) > 0 {
			add("unreachable from the entry step: %s", strings.Join(unreachable, ", "))
		}
	}
	if c := unboundedCycle(in.Steps, byKey, out); c != nil {
		add("cycle %s does not pass through a GATE or CRON step (which bounds it by maxRetries)", strings.Join(c, " -> "))
	}
	return problems
}

// unboundedCycle returns a cycle of the graph that has no GATE or CRON step on it, or nil.
func unboundedCycle(steps []Step, byKey map[string]Step, out map[string][]Edge) []string {
	bounded := func(k string) bool { t := byKey[k].Type; return t == StepGate || t == StepCron }
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(k string) bool
	visit = func(k string) bool {
		color[k] = grey
		stack = append(stack, k)
		for _, e := range out[k] {
			if bounded(e.To) {
				continue
			}
			switch color[e.To] {
			case grey:
				i := slices.Index(stack, e.To)
				found = append(slices.Clone(stack[i:]), e.To)
				return true
			case white:
				if visit(e.To) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[k] = black
		return false
	}
	for _, st := range steps {
		if _, ok := byKey[st.Key]; !ok || bounded(st.Key) || color[st.Key] != white {
			continue
		}
		if visit(st.Key) {
			return found
		}
	}
	return nil
}
