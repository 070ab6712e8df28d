package routine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/tool"
)

// Tool names of the structured answers of routine steps.
const (
	GateVerdictTool = "gate_verdict"
	CronSignalTool  = "cron_signal"
)

// Verdict is a gate's answer (gate_verdict's arguments).
type Verdict struct {
	Passed   bool   `json:"passed"`
	Feedback string `json:"feedback"`
}

// Signal is a cron step's answer (cron_signal's arguments): pass, fail, wait or abort.
type Signal struct {
	Status string `json:"status"`
	Output string `json:"output"`
}

// Tools are the routine tools, offered only to the runs of GATE and CRON steps.
func Tools() []tool.Tool { return []tool.Tool{verdictTool{}, signalTool{}} }

type verdictTool struct{}

func (verdictTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name:        GateVerdictTool,
		Description: "Give the gate's verdict on the work: passed true or false, and feedback saying what to change (required when it fails).",
		Parameters: json.RawMessage(`{"type":"object","properties":{"passed":{"type":"boolean"},"feedback":{"type":"string","maxLength":20000}},` +
			`"required":["passed"],"additionalProperties":false}`),
	}
}
func (verdictTool) Risk(json.RawMessage) int { return 0 }
func (verdictTool) ReadOnly() bool           { return true }
func (verdictTool) Run(_ context.Context, _ tool.Env, args json.RawMessage) (tool.Result, error) {
	var v Verdict
	if err := json.Unmarshal(args, &v); err != nil {
		return tool.Result{}, err
	}
	if v.Passed {
		return tool.Result{Output: "verdict recorded: passed. Answer with a one-line summary."}, nil
	}
	return tool.Result{Output: "verdict recorded: failed. Answer with a one-line summary."}, nil
}

type signalTool struct{}

func (signalTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name:        CronSignalTool,
		Description: "Signal the state of what this step watches: pass (it is done), fail (it went wrong), wait (look again later) or abort (give up now); output says why.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","enum":["pass","fail","wait","abort"]},"output":{"type":"string","maxLength":20000}},` +
			`"required":["status"],"additionalProperties":false}`),
	}
}
func (signalTool) Risk(json.RawMessage) int { return 0 }
func (signalTool) ReadOnly() bool           { return true }
func (signalTool) Run(_ context.Context, _ tool.Env, args json.RawMessage) (tool.Result, error) {
	var s Signal
	if err := json.Unmarshal(args, &s); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: fmt.Sprintf("signal recorded: %s. Answer with a one-line summary.", s.Status)}, nil
}
