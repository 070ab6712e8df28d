package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/workspace"
)

// stepResult is what a VALIDATE step did.
type stepResult struct {
	failures  []Failure
	failedIDs []uuid.UUID // tool call ids that failed
	ok        int
}

// plannedCall is a call of a step with what VALIDATE decided for it.
type plannedCall struct {
	call dbsqlc.ToolCall
	// skip is why the call does not run ("" when it runs): the user rejected it, or its
	// approval expired.
	skip string
}

// validate executes one step: the pending calls of the oldest model reply among pending
// (normally there is only one). First every call that needs a person is looked at: while one
// has no decision yet the run asks about it and parks, and nothing of the step runs. Then the
// step runs all or nothing: a step of read-only calls that need nobody runs them in parallel
// and commits their results together; any other step runs its calls in order inside ONE fenced
// transaction, each tool in a savepoint, committing every workspace change, tool result and
// event of the step together (runStep). A crash, cancel or lost lease before that commit leaves
// the workspace as it was before the step, and the next attempt runs the whole step again.
func (a *attempt) validate(ctx context.Context, pending []dbsqlc.ToolCall) (stepResult, *result) {
	var res stepResult
	step := stepOf(pending)
	plans := make([]plannedCall, len(step))
	asks := make([]int, 0, len(step)) // risk of each call that needs a person, -1 otherwise
	parallel := len(step) > 1
	for i, c := range step {
		plans[i].call = c
		known, readOnly := a.tools().Info(c.Name)
		risk := a.tools().Risk(c.Name, c.Arguments)
		needs := a.e.approvals != nil && a.e.approvals.Needs(a.set, known, readOnly, risk)
		if !readOnly || needs {
			parallel = false
		}
		if !needs {
			risk = -1
		}
		asks = append(asks, risk)
	}
	decisions := make([]ApprovalState, len(step))
	if slices.ContainsFunc(asks, func(r int) bool { return r >= 0 }) {
		err := a.e.db.InTx(ctx, a.lease.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
			for i, c := range step {
				if asks[i] < 0 {
					continue
				}
				var err error
				if decisions[i], err = a.e.approvals.ToolCall(ctx, tx, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			r := a.fromError(ctx, err)
			return res, &r
		}
	}
	for i := range plans {
		if asks[i] < 0 {
			continue
		}
		switch decisions[i] {
		case ApprovalApproved:
		case ApprovalRejected:
			plans[i].skip = "rejected by the user"
		case ApprovalExpired:
			plans[i].skip = "not run: the approval request expired"
		default:
			// One question at a time: the run parks until this one is decided, and the step
			// runs once every call that needs a person has its answer.
			r := a.requestApproval(ctx, plans[i].call, asks[i])
			return res, &r
		}
	}
	if r, parked := a.park(ctx, step); parked {
		return res, &r
	}
	var err error
	if parallel {
		err = a.runParallel(ctx, step, &res)
	} else {
		err = a.runStep(ctx, plans, &res)
	}
	if err != nil {
		r := a.fromError(ctx, err)
		return res, &r
	}
	return res, nil
}

// stepOf returns the calls of the oldest model reply among pending, in their order.
func stepOf(pending []dbsqlc.ToolCall) []dbsqlc.ToolCall {
	var out []dbsqlc.ToolCall
	for _, c := range pending {
		if c.MessageID == pending[0].MessageID {
			out = append(out, c)
		}
	}
	return out
}

// start marks calls RUNNING with their tool.started events, in a fenced transaction of its own,
// so that subscribers see what a step is doing while it runs.
func (a *attempt) start(ctx context.Context, calls []dbsqlc.ToolCall) error {
	if len(calls) == 0 {
		return nil
	}
	return a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		for _, c := range calls {
			if _, err := tx.Q.ToolCallStart(ctx, dbsqlc.ToolCallStartParams{TenantID: c.TenantID, ID: c.ID}); err != nil {
				return fmt.Errorf("start tool call: %w", err)
			}
			if _, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), events.New{Type: events.ToolStarted, Data: map[string]any{
				"toolCallId": c.ID, "name": c.Name, "arguments": json.RawMessage(c.Arguments),
			}}); err != nil {
				return err
			}
		}
		return nil
	})
}

// note counts a call's outcome in res.
func (res *stepResult) note(c dbsqlc.ToolCall, runErr error) {
	if runErr != nil {
		res.failures = append(res.failures, Failure{Name: c.Name, Args: c.Arguments, Error: runErr.Error()})
		res.failedIDs = append(res.failedIDs, c.ID)
		return
	}
	res.ok++
}

// runParallel executes read-only calls concurrently, each in its own read transaction, and
// commits their results together.
func (a *attempt) runParallel(ctx context.Context, batch []dbsqlc.ToolCall, res *stepResult) error {
	if err := a.start(ctx, batch); err != nil {
		return err
	}
	outs := make([]string, len(batch))
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, c := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, end := a.toolSpan(ctx, c)
			errs[i] = a.e.db.InTx(ctx, c.TenantID, func(ctx context.Context, tx *db.Tx) error {
				var err error
				outs[i], err = a.tools().Run(ctx, tx, a.callOf(c))
				return err
			})
			end(errs[i])
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := a.e.runs.InFenceWork(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		for i, c := range batch {
			if err := a.recordCall(ctx, tx, c, outs[i], errs[i], ""); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for i, c := range batch {
		res.note(c, errs[i])
	}
	return nil
}

// runStep executes a step's calls in order in one fenced transaction: each tool runs in a
// savepoint (its failure undoes only its own partial effects and is reported to the model),
// and every call's workspace changes, journal entries, result, tool-result message and events
// commit together, or not at all. Calls the user refused are recorded (REJECTED) in the same
// transaction without running.
func (a *attempt) runStep(ctx context.Context, plans []plannedCall, res *stepResult) error {
	var runnable []dbsqlc.ToolCall
	for _, p := range plans {
		if p.skip == "" {
			runnable = append(runnable, p.call)
		}
	}
	if err := a.start(ctx, runnable); err != nil {
		return err
	}
	errs := make([]error, len(plans))
	// The tools run inside this transaction, so it takes the lease alone: locking the
	// conversation first would hold back every message sent to it until the step ends. Its
	// tool-result messages then lock the conversation after the lease, the reverse of an
	// interrupting sendMessage's order, so that race can deadlock: Postgres ends one side, and
	// the controls run again (db.InTxRetry) once the step has gone on.
	// Once the run's cancel was requested the step is refused (InFenceStep).
	err := a.e.runs.InFenceStep(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		for i, p := range plans {
			c := p.call
			if p.skip != "" {
				if err := a.recordCall(ctx, tx, c, "", errors.New(p.skip), run.ToolCallRejected); err != nil {
					return err
				}
				continue
			}
			var output string
			sctx, end := a.toolSpan(ctx, c)
			errs[i] = a.e.db.InTx(sctx, c.TenantID, func(ctx context.Context, stx *db.Tx) error {
				var err error
				output, err = a.tools().Run(workspace.ForRun(ctx, a.e.pub, a.lease.Scope(), c.ID), stx, a.callOf(c))
				return err
			})
			end(errs[i])
			if ctx.Err() != nil {
				return ctx.Err() // cancelled, timed out or lease lost: nothing of the step commits
			}
			if err := a.recordCall(ctx, tx, c, output, errs[i], ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, p := range plans {
		if p.skip == "" {
			res.note(p.call, errs[i])
		}
	}
	return nil
}

// toolSpan starts the span of tool call c; end finishes it with the call's error.
func (a *attempt) toolSpan(ctx context.Context, c dbsqlc.ToolCall) (context.Context, func(error)) {
	ctx, span := a.e.tracer.Start(ctx, "tool.call", trace.WithAttributes(attribute.String("tool.name", c.Name), attribute.String("tool.call_id", c.CallID)))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "tool failed")
		}
		span.End()
	}
}

func (a *attempt) callOf(c dbsqlc.ToolCall) ToolCall {
	r := a.lease.Run
	return ToolCall{TenantID: r.TenantID, ProjectID: a.conv.ProjectID, UserID: r.UserID, RunID: r.ID, Name: c.Name, Args: c.Arguments}
}

// recordCall stores a call's result, the tool-result message and its event.
func (a *attempt) recordCall(ctx context.Context, tx *db.Tx, c dbsqlc.ToolCall, output string, runErr error, status run.ToolCallStatus) error {
	r := a.lease.Run
	evType := events.ToolCompleted
	if status == "" {
		status = run.ToolCallCompleted
	}
	result := llm.Block{Type: llm.BlockToolResult, ToolUseID: c.CallID, Content: output}
	var outPtr, errPtr *string
	if runErr != nil {
		if status == run.ToolCallCompleted {
			status = run.ToolCallFailed
		}
		evType = events.ToolFailed
		msg := runErr.Error()
		result.Content, result.IsError = msg, true
		errPtr = &msg
	} else {
		outPtr = &output
	}
	if _, err := tx.Q.ToolCallFinish(ctx, dbsqlc.ToolCallFinishParams{TenantID: r.TenantID, ID: c.ID, Status: status, Output: outPtr, Error: errPtr}); err != nil {
		return fmt.Errorf("finish tool call: %w", err)
	}
	tool := c.Name
	if known := a.e.tools != nil && a.knownTool(tool); !known {
		tool = "unknown" // a name the model made up must not become a label value
	}
	tx.AfterCommit(func() { a.e.metrics.ToolCall(tool, strings.ToLower(string(status))) })
	if _, err := a.insertMessage(ctx, tx, "TOOL", []llm.Block{result}, nil); err != nil {
		return fmt.Errorf("store tool result: %w", err)
	}
	data := map[string]any{"toolCallId": c.ID, "name": c.Name, "status": status, "output": truncate(result.Content, 2000)}
	if runErr != nil {
		data = map[string]any{"toolCallId": c.ID, "name": c.Name, "status": status, "error": truncate(result.Content, 2000)}
	}
	_, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), events.New{Type: evType, Data: data})
	return err
}

func (a *attempt) knownTool(name string) bool {
	known, _ := a.e.tools.Info(name)
	return known
}
