package subagent

import (
	"slices"

	"github.com/agentry/agentry/internal/tool"
)

// Roles of a sub-agent.
const (
	RoleResearcher = "RESEARCHER"
	RoleCoder      = "CODER"
	RoleReviewer   = "REVIEWER"
	RoleTester     = "TESTER"
	RoleAnalyst    = "ANALYST"
	RoleCreative   = "CREATIVE"
	RoleGeneral    = "GENERAL"
)

// Roles lists every role, in the API's order.
var Roles = []string{RoleResearcher, RoleCoder, RoleReviewer, RoleTester, RoleAnalyst, RoleCreative, RoleGeneral}

// role is what a role gives its sub-agents: a system prompt and which tools.
type role struct {
	prompt string
	// readOnly roles get only the tools that change nothing; none gets no tool at all.
	readOnly, none bool
}

var roles = map[string]role{
	RoleResearcher: {prompt: "You are a researcher sub-agent: gather information and analyse it. You only read; report your findings clearly, with where you found them.", readOnly: true},
	RoleCoder:      {prompt: "You are a coder sub-agent: write and change code to do what you were asked. Keep changes focused and explain what you changed."},
	RoleReviewer:   {prompt: "You are a reviewer sub-agent: review the work you were pointed at for correctness and quality. You only read; list concrete problems and what to do about each.", readOnly: true},
	RoleTester:     {prompt: "You are a tester sub-agent: write tests and run what can be run to check the work you were given. Report what passed and what failed."},
	RoleAnalyst:    {prompt: "You are an analyst sub-agent: analyse the data you were pointed at. You only read; answer with the figures and what they mean.", readOnly: true},
	RoleCreative:   {prompt: "You are a creative sub-agent: write and come up with ideas for what you were asked. You work from the request alone.", none: true},
	RoleGeneral:    {prompt: "You are a sub-agent: do the task you were given and answer with the result."},
}

// Tool names of this package.
const (
	SpawnToolName = "spawn_subagent"
	WaitToolName  = "wait_subagents"
)

// memoryWriters are tools a sub-agent never gets: memories are the user's, written by the runs
// the user started.
var memoryWriters = []string{"remember"}

// Prompt is the system prompt of a role's sub-agents.
func Prompt(r string) string {
	return roles[r].prompt + " When you are done, answer with the result and no tool call: that answer is what the agent that started you receives."
}

// toolsFor returns the tools a sub-agent of role r may call: its role's, narrowed to parent
// (what its parent may call; nil means every tool of reg). Tools that write memories are never
// given, nor any tool its parent lacks.
func toolsFor(reg *tool.Registry, r string, parent []string) []string {
	ro := roles[r]
	if ro.none {
		return []string{}
	}
	out := []string{}
	for _, name := range reg.Names() {
		if slices.Contains(memoryWriters, name) {
			continue
		}
		if parent != nil && !slices.Contains(parent, name) {
			continue
		}
		t, err := reg.Get(name)
		if err != nil {
			continue
		}
		if ro.readOnly && !t.ReadOnly() && name != SpawnToolName && name != WaitToolName {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
