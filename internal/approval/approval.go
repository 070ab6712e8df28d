// Package approval is human-in-the-loop: deciding which tool calls need a person, asking
// (a PENDING approval that parks the run AWAITING_APPROVAL, with no worker holding it), and
// recording the person's decision or the request's expiry, which makes the run workable again.
// An approval of a tool call is bound to that exact call (tool name and arguments hash), so it
// can never let a different call run. See ARCHITECTURE.md.
//
// # Which calls need a person
//
// Each call has a risk from 0 to 100: the tool's base risk adjusted by its arguments (the rules
// and figures are documented in internal/tool/risk.go: the base score per built-in tool, raised
// by how sensitive the path argument is, and scored high when the arguments cannot be read). A
// tool the registry does not know scores 100. Then, with the caller's settings:
//
//	unknown tool                       always needs approval
//	autoExecute off                    every call that is not read-only needs approval
//	autoExecute on                     calls whose risk is above approvalThreshold need approval
//
// Needs encodes this table and Assess scores a call against a tool registry.
package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"

	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/status"
	"github.com/agentry/agentry/internal/tool"
)

// Kinds of approval: what a person is asked about.
const (
	// KindToolCall asks whether one tool call may run.
	KindToolCall = "tool_call"
	// KindContinue asks whether a long run may go on (the long-task confirmation).
	KindContinue = "continue"
	// KindRollback asks what to do with a failed run's workspace changes.
	KindRollback = "rollback"
	// KindEscalation hands a question the agent cannot settle to a person.
	KindEscalation = "escalation"
	// KindTeamBlocked asks, after a team run's reviewer blocked it, whether the team goes on
	// for one more iteration (APPROVE) or stops (REJECT). Its run has ended; the decision is the
	// team's (Service.OnDecision).
	KindTeamBlocked = "team_blocked"
	// KindSubagent asks whether a spawned sub-agent may start (its user's subagentApproval is
	// REQUIRED). It is asked of the sub-agent's own run, which waits for the dispatcher without
	// a job; the decision is the sub-agent service's (Service.OnDecision): APPROVE lets the
	// dispatcher start it, REJECT or expiry cancels it.
	KindSubagent = "subagent"
)

// Status is the status of an approval.
type Status = status.Approval

// Statuses of an approval. PENDING is the only one that changes, once, to one of the others.
const (
	StatusPending  Status = "PENDING"
	StatusApproved Status = "APPROVED"
	StatusRejected Status = "REJECTED"
	StatusExpired  Status = "EXPIRED"
)

// Decisions a person gives in Resolve (the GraphQL ApprovalDecision enum).
const (
	DecisionApprove = "APPROVE"
	DecisionReject  = "REJECT"
)

// UnknownToolRisk is the risk of a call to a tool the registry does not know.
const UnknownToolRisk = 100

// ValidKind reports whether kind is one of the kinds.
func ValidKind(kind string) bool {
	switch kind {
	case KindToolCall, KindContinue, KindRollback, KindEscalation, KindTeamBlocked, KindSubagent:
		return true
	}
	return false
}

// Needs decides whether a call needs a person: unknown tools always; with autoExecute off every
// call that is not read-only; with it on, calls whose risk is above threshold.
func Needs(autoExecute bool, threshold int, known, readOnly bool, risk int) bool {
	switch {
	case !known:
		return true
	case !autoExecute:
		return !readOnly
	default:
		return risk > threshold
	}
}

// Assess looks a call up in reg: whether the tool exists, whether it only reads, and the call's
// risk (the tool's own scoring of these arguments; UnknownToolRisk for an unknown tool).
func Assess(reg *tool.Registry, name string, args json.RawMessage) (known, readOnly bool, risk int) {
	t, err := reg.Get(name)
	if err != nil {
		return false, false, UnknownToolRisk
	}
	return true, t.ReadOnly(), min(100, max(0, t.Risk(args)))
}

// ArgsHash binds an approval to one exact call: SHA-256 over the tool name (length-prefixed)
// and the arguments as canonical JSON (object keys sorted recursively, no insignificant
// whitespace, strings re-encoded from their decoded value, numbers as written). So
// {"a":1,"b":2} and {"b":2, "a":1} hash alike, but any other value does not; "1" and "1.0" are
// different calls. Arguments that are not one valid JSON value in valid UTF-8 are an error.
//
// Both sides hash the arguments as stored in tool_calls (jsonb), so Postgres' own
// normalisation (duplicate keys: the last wins, as in Go) applies to both alike.
func ArgsHash(name string, args json.RawMessage) ([]byte, error) {
	canon, err := Canonical(args)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	h.Write(canon)
	return h.Sum(nil), nil
}

// Canonical returns args as canonical JSON (see ArgsHash).
func Canonical(args json.RawMessage) ([]byte, error) {
	if !utf8.Valid(args) {
		return nil, errors.New("tool arguments are not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("tool arguments are not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("tool arguments are not one JSON value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		return writeString(buf, x)
	case json.Number:
		buf.WriteString(x.String())
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// Permits reports whether a lets call run: a is an APPROVED tool_call approval of this very
// call (same tenant, run, tool call id and tool name, and the hash of the call's arguments as
// they are now), decided before it expired. Anything else (pending, rejected, expired, another
// call, arguments that differ in any value) does not permit it.
func Permits(a dbsqlc.Approval, call dbsqlc.ToolCall) bool {
	if a.Status != StatusApproved || a.Kind != KindToolCall {
		return false
	}
	if a.TenantID != call.TenantID || a.RunID != call.RunID || !a.ToolCallID.Valid || a.ToolCallID.UUID != call.ID {
		return false
	}
	if a.ToolName == nil || *a.ToolName != call.Name {
		return false
	}
	if a.DecidedAt == nil || !a.DecidedAt.Before(a.ExpiresAt) {
		return false
	}
	h, err := ArgsHash(call.Name, call.Arguments)
	return err == nil && len(a.ArgsHash) == sha256.Size && bytes.Equal(h, a.ArgsHash)
}
