package demo

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/llm"
)

// Commands is what the demo understands, as its "help" answer lists it and docs/api/demo.md shows
// it. A message is a list of commands, one a line or joined with "then"; the demo works them in
// order, one tool call per model call, and then answers with what the last tool returned.
const Commands = `I am the offline demo model. I understand these commands, one a line or joined with "then":
  write PATH: TEXT           write a file (write_file; asks for your approval unless autoExecute is on; \n in TEXT is a new line)
  edit PATH: OLD -> NEW      replace OLD with NEW in a file (edit_file)
  read PATH                  read a file (read_file)
  delete PATH                delete a file (delete_file)
  list files                 list the workspace (list_files)
  fail transient|recoverable|terminal [once]
                             fail the model call with that failure class (once: only its first attempt)
  stream slowly              answer slowly (each step after it), to leave time for pauseRun, stopRun or cancelRun
  spawn a sub-agent: GOAL    hand GOAL to a sub-agent (spawn_subagent); GOAL is the sub-agent's own
                             commands, ";" between them. "spawn a coder sub-agent with priority 1
                             with max tokens 5000: ..." picks the role and limits
  spawn N sub-agents with priorities P,Q,...: GOAL
                             N spawn_subagent calls in one reply, their priorities in turn from the list
  think for N ms             pause N milliseconds before the next answer
  wait for sub-agents [for N seconds]
                             wait for this run's sub-agents and answer with their results
                             (wait_subagents; at most N seconds when given)
  help                       this list
For example "write notes.md: hello then fail terminal" makes a change and then fails: the run
asks you whether to roll its change back (resolveRollback).`

// Tool names the commands call.
const (
	WriteFileTool     = "write_file"
	EditFileTool      = "edit_file"
	ReadFileTool      = "read_file"
	DeleteFileTool    = "delete_file"
	SpawnSubagentTool = "spawn_subagent"
	WaitSubagentsTool = "wait_subagents"
)

// command is one parsed command: a tool call (tool and args set) or something the demo does
// itself (fail, slow, help, spawn without its tool).
type command struct {
	tool  string
	args  map[string]any
	say   string // what the demo says while calling tool
	fail  llm.Class
	once  bool
	slow  bool
	help  bool
	spawn string // a spawn command's goal
	// spawns are the arguments of a multi-spawn's calls (one reply).
	spawns []map[string]any
	think  time.Duration
}

var (
	thenRE   = regexp.MustCompile(`(?i)\s+then\s+`)
	writeRE  = regexp.MustCompile(`(?is)^(?:write|create)(?:\s+(?:a|the))?(?:\s+file)?\s+(\S+?)\s*:\s?(.*)$`)
	editRE   = regexp.MustCompile(`(?is)^(?:edit|change)(?:\s+the)?(?:\s+file)?\s+(\S+?)\s*:\s*(.*?)\s*->\s*(.*)$`)
	readRE   = regexp.MustCompile(`(?i)^(?:read|open|cat)(?:\s+the)?(?:\s+file)?\s+(\S+)$`)
	deleteRE = regexp.MustCompile(`(?i)^(?:delete|remove)(?:\s+the)?(?:\s+file)?\s+(\S+)$`)
	failRE   = regexp.MustCompile(`(?i)^fail(?:\s+with)?\s+(transient|recoverable|terminal)(\s+once)?$`)
	slowRE   = regexp.MustCompile(`(?i)^(?:stream|answer|reply)?\s*slowly$`)
	helpRE   = regexp.MustCompile(`(?i)^(?:help|what can you do\??)$`)
	spawnRE  = regexp.MustCompile(`(?is)^spawn(?:\s+an?)?(?:\s+(researcher|coder|reviewer|tester|analyst|creative|general))?\s+sub-?agent((?:\s+(?:with\s+)?(?:priority|max tokens|max turns|timeout)\s+\d+)*)\s*:?\s*(.*)$`)
	limitRE  = regexp.MustCompile(`(?i)(priority|max tokens|max turns|timeout)\s+(\d+)`)
	multiRE  = regexp.MustCompile(`(?is)^spawn\s+(\d+)\s+sub-?agents(?:\s+with\s+priorities\s+([\d,\s]+?))?\s*:\s*(.*)$`)
	thinkRE  = regexp.MustCompile(`(?i)^think\s+for\s+(\d+)\s*ms$`)
	waitRE   = regexp.MustCompile(`(?i)^wait(?:\s+for)?(?:\s+(?:the|my))?\s+sub-?agents?(?:\s+for\s+(\d{1,5})\s+seconds?)?$`)
)

// parseCommands reads text as commands; ok is false unless every part of it is one (then the
// text is a message, not commands).
func parseCommands(text string) ([]command, bool) {
	var parts []string
	for _, line := range strings.Split(text, "\n") {
		parts = append(parts, thenRE.Split(line, -1)...)
	}
	var cmds []command
	for _, part := range parts {
		part = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(part), ".!"))
		if part == "" {
			continue
		}
		c, ok := parseCommand(part)
		if !ok {
			return nil, false
		}
		cmds = append(cmds, c)
	}
	return cmds, len(cmds) > 0
}

func parseCommand(s string) (command, bool) {
	// A spawn's goal is the sub-agent's own commands: it is matched first.
	if m := multiRE.FindStringSubmatch(s); m != nil {
		var n int
		_, _ = fmt.Sscan(m[1], &n)
		if n < 1 || n > 50 {
			return command{}, false
		}
		var prios []int
		for _, p := range strings.Split(m[2], ",") {
			var v int
			if _, err := fmt.Sscan(strings.TrimSpace(p), &v); err == nil {
				prios = append(prios, v)
			}
		}
		goal := strings.TrimSpace(strings.ReplaceAll(m[3], ";", "\n"))
		c := command{spawn: goal}
		for i := range n {
			args := map[string]any{"role": "GENERAL", "goal": goal}
			if len(prios) > 0 {
				args["priority"] = prios[i%len(prios)]
			}
			c.spawns = append(c.spawns, args)
		}
		c.args = c.spawns[0]
		return c, true
	}
	if m := thinkRE.FindStringSubmatch(s); m != nil {
		var ms int
		_, _ = fmt.Sscan(m[1], &ms)
		return command{think: time.Duration(min(ms, 60_000)) * time.Millisecond}, true
	}
	if m := spawnRE.FindStringSubmatch(s); m != nil {
		role := strings.ToUpper(m[1])
		if role == "" {
			role = "GENERAL"
		}
		goal := strings.TrimSpace(strings.ReplaceAll(m[3], ";", "\n"))
		args := map[string]any{"role": role, "goal": goal}
		for _, l := range limitRE.FindAllStringSubmatch(m[2], -1) {
			var n int
			_, _ = fmt.Sscan(l[2], &n)
			key := map[string]string{"priority": "priority", "max tokens": "max_tokens", "max turns": "max_turns", "timeout": "timeout_minutes"}[strings.ToLower(l[1])]
			args[key] = n
		}
		return command{spawn: goal, args: args}, true
	}
	if m := writeRE.FindStringSubmatch(s); m != nil {
		content := strings.ReplaceAll(m[2], `\n`, "\n")
		return command{tool: WriteFileTool, args: map[string]any{"path": m[1], "content": content}, say: "Writing " + m[1] + "."}, true
	}
	if m := editRE.FindStringSubmatch(s); m != nil {
		return command{tool: EditFileTool, args: map[string]any{"path": m[1], "old_string": m[2], "new_string": m[3]}, say: "Editing " + m[1] + "."}, true
	}
	if wantsFiles(s) {
		return command{tool: ListFilesTool, args: map[string]any{}, say: "Let me list the files of the workspace."}, true
	}
	if m := readRE.FindStringSubmatch(s); m != nil {
		return command{tool: ReadFileTool, args: map[string]any{"path": m[1]}, say: "Reading " + m[1] + "."}, true
	}
	if m := deleteRE.FindStringSubmatch(s); m != nil {
		return command{tool: DeleteFileTool, args: map[string]any{"path": m[1]}, say: "Deleting " + m[1] + "."}, true
	}
	if m := failRE.FindStringSubmatch(s); m != nil {
		return command{fail: llm.Class(strings.ToUpper(m[1])), once: m[2] != ""}, true
	}
	if m := waitRE.FindStringSubmatch(s); m != nil {
		args := map[string]any{}
		if m[1] != "" {
			n, _ := strconv.Atoi(m[1])
			args["timeout_seconds"] = n
		}
		return command{tool: WaitSubagentsTool, args: args, say: "Waiting for my sub-agents."}, true
	}
	switch {
	case slowRE.MatchString(s):
		return command{slow: true}, true
	case helpRE.MatchString(s):
		return command{help: true}, true
	}
	return command{}, false
}

// runCommands answers the model call that comes after the tool calls already made for the
// commands of message u: the next tool call, a failure, or, when every command is done, what
// the last tool returned.
func runCommands(req llm.Request, u int, cmds []command, passOnce func(key string) bool) answer {
	done := 0 // tool calls made since message u
	for _, m := range req.Messages[u+1:] {
		for _, b := range m.Blocks {
			if b.Type == llm.BlockToolUse {
				done++
				break
			}
		}
	}
	last := req.Messages[len(req.Messages)-1]
	if a, ok := toolResultAnswer(req, last); ok && lastResultFailed(last) {
		return a // a failed or declined call ends the commands
	}
	var a answer
	calls := 0
	for i, c := range cmds {
		if c.slow {
			a.slow = true // from here on, every answer to the message
			continue
		}
		if c.think > 0 {
			a.think = c.think // from here on, every answer to the message
			continue
		}
		if c.tool != "" || (c.spawn != "" && offeredName(req.Tools, SpawnSubagentTool)) {
			if calls < done {
				calls++
				continue
			}
			return a.withCall(req, c)
		}
		if calls < done {
			continue // worked before the calls already made
		}
		switch {
		case c.fail != "":
			if c.once && passOnce(failKey(req, u, i)) {
				continue
			}
			return answer{fail: &llm.Error{Class: c.fail, Provider: Name,
				Message: fmt.Sprintf("the demo model failed this call as asked (fail %s)", strings.ToLower(string(c.fail)))}}
		case c.help:
			return answer{text: Label + Commands, slow: a.slow}
		case c.spawn != "":
			return answer{text: Label + "I cannot start a sub-agent here: the spawn_subagent tool is not offered to this run, so \"" + c.spawn + "\" stays undone.", slow: a.slow}
		}
	}
	if r, found := toolResultAnswer(req, last); found && done > 0 {
		r.slow, r.think = a.slow, a.think
		return r
	}
	if a.slow {
		a.text = Label + slowText
		return a
	}
	return answer{text: Label + "Done.", think: a.think}
}

// withCall is a with the tool call c asks for; a command whose tool is not offered is answered
// in words.
func (a answer) withCall(req llm.Request, c command) answer {
	name, args := c.tool, c.args
	if c.spawn != "" {
		name, args = SpawnSubagentTool, c.args
	}
	spec, ok := offered(req.Tools, name)
	if !ok {
		a.text = Label + fmt.Sprintf("I would call the %s tool, but it is not offered here: this conversation has its tools off (agentic: false).", name)
		return a
	}
	input, _ := json.Marshal(args)
	if name == ListFilesTool {
		input = listArgs(spec)
	}
	a.text = Label + c.say
	if c.spawn != "" {
		a.text = Label + "Handing this to a sub-agent."
	}
	if a.slow {
		a.text += " " + slowText
	}
	a.call = &llm.Block{Type: llm.BlockToolUse, ID: callID(req), Name: name, Input: input}
	for i, more := range c.spawns[min(1, len(c.spawns)):] {
		in, _ := json.Marshal(more)
		a.more = append(a.more, llm.Block{Type: llm.BlockToolUse, ID: fmt.Sprintf("%s-%d", a.call.ID, i+2), Name: name, Input: in})
	}
	return a
}

// slowText is the reply to "stream slowly": long enough to pause, stop or cancel it midway.
const slowText = "Here is a slow answer, one word at a time, so that there is time to try what agentry does with a run that is still going: pauseRun parks it after its current step, stopRun lets it finish the step and end with a summary, and cancelRun stops it at once and closes this stream. Subscribers that join late still see every stored event. This is the offline demo model, not a real one, and this sentence is only here to take a while to stream."

// lastUserText returns the index of the last message in which the user wrote something, or
// -1. Such a message may carry more than the user's newest words: a context joins a run's last
// tool results, and messages sent while no answer came between, into one (userText reads the
// newest).
func lastUserText(msgs []llm.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser && userText(msgs[i]) != "" {
			return i
		}
	}
	return -1
}

// userText is the newest text the user wrote in m: its last text block.
func userText(m llm.Message) string {
	for i := len(m.Blocks) - 1; i >= 0; i-- {
		if b := m.Blocks[i]; b.Type == llm.BlockText && strings.TrimSpace(b.Text) != "" {
			return strings.TrimSpace(b.Text)
		}
	}
	return ""
}

func lastResultFailed(m llm.Message) bool {
	for _, b := range m.Blocks {
		if b.Type == llm.BlockToolResult && b.IsError {
			return true
		}
	}
	return false
}

func offeredName(tools []llm.ToolSpec, name string) bool {
	_, ok := offered(tools, name)
	return ok
}

// failKey names command i of message u of the conversation in req: the same on a retry of the
// call, other for another message.
func failKey(req llm.Request, u, i int) string {
	h := fnv.New64a()
	for _, m := range req.Messages[:u+1] {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Role, m.Text())
	}
	return fmt.Sprintf("%016x/%d/%d", h.Sum64(), u, i)
}
