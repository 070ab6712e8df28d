// Package tool defines what an agent can call: the Tool interface, the Registry that offers
// tools to the model and checks their arguments against each tool's JSON schema before they run,
// the risk scores that decide which calls need a person's approval, and the built-in tools (one
// file each) over the project's workspace.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/llm"
)

// Tool is one capability offered to the model.
type Tool interface {
	// Spec is what the model sees: the name, a description and the JSON schema of the
	// arguments (an object). It is the same on every call.
	Spec() llm.ToolSpec
	// Risk scores a call with these arguments from 0 (harmless) to 100 (dangerous); calls above
	// the user's approval threshold wait for a person. It must not fail: arguments it cannot
	// read score as high as the tool can score.
	Risk(args json.RawMessage) int
	// ReadOnly reports that the tool changes nothing: its calls may run in parallel and never
	// need approval for changing state.
	ReadOnly() bool
	// Run performs a call. A returned error is a tool failure reported back to the model (a bad
	// argument, a missing file), not a crash of the run; *ArgumentError marks bad arguments.
	// Run is called inside env.Tx and its effects commit or roll back with it.
	Run(ctx context.Context, env Env, args json.RawMessage) (Result, error)
}

// Env is what a running tool may use: the transaction it runs in and who it runs for. The zero
// value is not usable; Tx must be set, scoped to TenantID.
type Env struct {
	// Tx is the tenant-scoped transaction the call runs in.
	Tx *db.Tx
	// TenantID and ProjectID name the workspace the call works on.
	TenantID  uuid.UUID
	ProjectID uuid.UUID
	// UserID is the user the run acts for.
	UserID uuid.UUID
	// RunID is the run making the call.
	RunID uuid.UUID
}

// Result is what a successful call answers to the model.
type Result struct {
	// Output is compact text for the model to read.
	Output string
}

// ArgumentError says that a call's arguments do not fit the tool: not JSON, wrong types,
// missing or unknown properties. Problems lists each in words. It unwraps to an apperr
// BAD_USER_INPUT error.
type ArgumentError struct {
	Tool     string
	Problems []string
}

// Error implements error.
func (e *ArgumentError) Error() string {
	return fmt.Sprintf("invalid arguments for %s: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// Unwrap gives the error's apperr form, so that apperr.CodeOf answers BAD_USER_INPUT.
func (e *ArgumentError) Unwrap() error {
	return apperr.New(apperr.BadUserInput, "%s", e.Error()).With("tool", e.Tool)
}

// ErrUnknownTool is wrapped by the error for a tool name the registry does not hold.
var ErrUnknownTool = errors.New("unknown tool")

// decodeArgs reads args (empty means {}) into v, refusing unknown properties.
func decodeArgs(tool string, args json.RawMessage, v any) error {
	if len(strings.TrimSpace(string(args))) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &ArgumentError{Tool: tool, Problems: []string{"arguments: " + err.Error()}}
	}
	if dec.More() {
		return &ArgumentError{Tool: tool, Problems: []string{"arguments: data after the JSON object"}}
	}
	return nil
}

// checkEnv refuses to run without a transaction.
func checkEnv(env Env) error {
	if env.Tx == nil {
		return errors.New("tool: no transaction in the environment")
	}
	return nil
}
