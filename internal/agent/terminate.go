package agent

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// Termination reasons recorded on runs.
const (
	ReasonCompleted        = "completed"    // the model stopped without calling a tool
	ReasonMaxTurns         = "max_turns"    // the turn limit
	ReasonMaxDuration      = "max_duration" // the wall-clock limit
	ReasonFailures         = "consecutive_failures"
	ReasonCircuitOpen      = "circuit_open"    // too many backtracks
	ReasonUserStop         = "user_stop"       // stopRun, or the user declined to continue
	ReasonUserIntent       = "user_intent"     // the user said to stop in a message
	ReasonBudget           = "budget_exceeded" // maxTokensPerTask used up, or a budget refused a call
	ReasonEscalated        = "escalation_declined"
	ReasonFailedGracefully = "failed_gracefully"
	ReasonTimeout          = "timeout"           // the attempt's or the run's time limit passed (TIMED_OUT)
	ReasonStreamFailed     = "stream_failed"     // the model's stream failed after output reached subscribers
	ReasonError            = "error"             // a failure of its class ended the run
	ReasonRetriesExhausted = "retries_exhausted" // the job's attempts are used up
)

// Signal is a reason to end (or pause) the run now.
type Signal struct {
	Reason string
	// Confirm is set for the long-task confirmation: pause and ask the user.
	Confirm bool
}

// AdaptiveTerminator decides between steps whether the run goes on. Its signals, checked in
// this order: the duration limit, the breaker's limits (consecutive failures, backtracks), the
// token budget (maxTokensPerTask output tokens), the user's intent to stop in a newer message,
// the turn limit, and the long-task confirmation every Limits.ConfirmAfter turns. (User stop
// and the model stopping by itself are handled where they happen.)
type AdaptiveTerminator struct {
	Limits    Limits
	MaxTokens int
	Now       func() time.Time
}

// Check returns the signal that ends the run now, if any. calls is the number of model calls
// made; confirmed is the last turn count the user confirmed going on at.
func (t AdaptiveTerminator) Check(r dbsqlc.Run, calls int, newer []dbsqlc.Message, confirmed int) (Signal, bool) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	switch {
	case t.Limits.MaxDuration > 0 && r.StartedAt != nil && now().Sub(*r.StartedAt) >= t.Limits.MaxDuration:
		return Signal{Reason: ReasonMaxDuration}, true
	case int(r.ConsecutiveFailures) >= MaxConsecutiveFailures:
		return Signal{Reason: ReasonFailures}, true
	case int(r.Backtracks) >= MaxBacktracks:
		return Signal{Reason: ReasonCircuitOpen}, true
	case t.MaxTokens > 0 && r.OutputTokens >= int64(t.MaxTokens):
		return Signal{Reason: ReasonBudget}, true
	case t.Limits.MaxTokens > 0 && r.InputTokens+r.OutputTokens >= t.Limits.MaxTokens:
		return Signal{Reason: ReasonBudget}, true
	}
	for _, m := range newer {
		if StopIntent(m.Content) {
			return Signal{Reason: ReasonUserIntent}, true
		}
	}
	if t.Limits.MaxTurns > 0 && calls >= t.Limits.MaxTurns {
		return Signal{Reason: ReasonMaxTurns}, true
	}
	if t.Limits.ConfirmAfter > 0 && calls > 0 && calls%t.Limits.ConfirmAfter == 0 && confirmed < calls {
		return Signal{Confirm: true}, true
	}
	return Signal{}, false
}

var stopIntent = regexp.MustCompile(`(?i)^\s*(please\s+)?(stop|halt|abort|cancel( that| it| this)?|never ?mind|forget it|that'?s enough|enough)\b[\s.!]*(now|please)?[\s.!]*$`)

// StopIntent reports whether a message asks the agent to stop ("stop", "please stop now",
// "never mind", "cancel that", ...). Only short, whole-message requests count, so "how do I stop
// a server?" does not.
func StopIntent(msg string) bool { return len(msg) <= 60 && stopIntent.MatchString(msg) }

// terminate asks the terminator whether the run ends before its next model call (calls is that
// call's index) and, when it does, ends it as the signal says: asks the user to confirm going
// on, completes it, or fails it (with a summary after consecutive failures).
func (a *attempt) terminate(ctx context.Context, term AdaptiveTerminator, p llm.Provider, m llm.Model, st state, calls int) (result, bool) {
	confirmed := a.confirmedAt(ctx)
	if confirmed < 0 {
		return done(run.Outcome{Status: run.StatusCompleted, TerminationReason: ReasonUserStop, Data: map[string]any{"declined": "continue"}}), true
	}
	sig, end := term.Check(st.run, calls, st.newer, confirmed)
	if !end {
		return result{}, false
	}
	if sig.Confirm {
		return a.askToContinue(ctx, calls), true
	}
	switch sig.Reason {
	case ReasonMaxTurns, ReasonUserIntent:
		return done(run.Outcome{Status: run.StatusCompleted, TerminationReason: sig.Reason}), true
	case ReasonFailures:
		return a.summarise(ctx, p, m, st, sig.Reason, run.StatusFailed), true
	case ReasonBudget:
		msg := "maxTokensPerTask used up"
		if a.limits.MaxTokens > 0 && st.run.InputTokens+st.run.OutputTokens >= a.limits.MaxTokens {
			msg = fmt.Sprintf("max tokens used up (%d of %d)", st.run.InputTokens+st.run.OutputTokens, a.limits.MaxTokens)
		}
		return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: sig.Reason, Error: msg}), true
	case ReasonMaxDuration:
		if a.limits.TimesOut {
			return done(run.Outcome{Status: run.StatusTimedOut, FailureClass: string(llm.Terminal), TerminationReason: ReasonTimeout, Error: "timed out: the run's time limit passed"}), true
		}
	}
	return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: sig.Reason, Error: "stopped: " + sig.Reason}), true
}
