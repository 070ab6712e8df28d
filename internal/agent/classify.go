package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Decision is what the ErrorClassifier makes of a step's tool failures.
type Decision string

// The classifier's decisions.
const (
	// Continue: the errors go back to the model as tool results; it adapts.
	Continue Decision = "CONTINUE"
	// Backtrack: the failed calls and their errors leave the context, replaced by a reflection
	// summary, and the model tries another approach.
	Backtrack Decision = "BACKTRACK"
	// FailGracefully: stop with a summary of what was done and why it stopped.
	FailGracefully Decision = "FAIL_GRACEFULLY"
	// Escalate: ask the user (AWAITING_APPROVAL with a question).
	Escalate Decision = "ESCALATE"
)

// Failure is one failed tool call.
type Failure struct {
	Name  string
	Args  []byte
	Error string
}

// Breaker limits (internal/agent/ARCHITECTURE.md).
const (
	// ReflectAfterFailures consecutive tool errors force a reflection turn.
	ReflectAfterFailures = 3
	// MaxConsecutiveFailures consecutive tool errors end the run (FAIL_GRACEFULLY).
	MaxConsecutiveFailures = 5
	// MaxBacktracks backtracks end the run (terminationReason circuit_open).
	MaxBacktracks = 5
)

// ErrorClassifier decides what to do about a step's tool failures. It is deterministic:
//
//   - a failure that says a person is needed (permission denied, not allowed, forbidden,
//     requires approval/a human) → ESCALATE;
//   - MaxConsecutiveFailures consecutive failures → FAIL_GRACEFULLY;
//   - a call to a tool that does not exist, or the same call (tool and arguments) failing again
//     in this run → BACKTRACK: repeating an approach that failed is a dead end;
//   - anything else → CONTINUE: the model sees the error and can correct itself.
type ErrorClassifier struct{}

// Classify decides about failures, given earlier failures of the run and the consecutive
// failure count including these.
func (ErrorClassifier) Classify(failures, earlier []Failure, consecutive int) Decision {
	for _, f := range failures {
		if needsPerson(f.Error) {
			return Escalate
		}
	}
	if consecutive >= MaxConsecutiveFailures {
		return FailGracefully
	}
	for _, f := range failures {
		if strings.Contains(f.Error, "unknown tool") {
			return Backtrack
		}
		for _, e := range earlier {
			if e.Name == f.Name && bytes.Equal(compact(e.Args), compact(f.Args)) {
				return Backtrack
			}
		}
	}
	return Continue
}

func needsPerson(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"permission denied", "not allowed", "forbidden", "requires approval", "requires a human", "ask the user"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// reflectionSummary is the note that replaces backtracked calls in the context: which
// approach failed and why, and that another one is needed.
func reflectionSummary(failures []Failure) string {
	var b strings.Builder
	b.WriteString("Reflection (agentry): an approach failed and was taken out of the conversation.\n")
	for _, f := range failures {
		fmt.Fprintf(&b, "- approach %s(%s) failed because: %s\n", f.Name, truncate(string(f.Args), 300), truncate(f.Error, 500))
	}
	b.WriteString("Do not repeat it; trying a different approach.")
	return b.String()
}
