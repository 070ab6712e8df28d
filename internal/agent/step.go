package agent

import (
	"bytes"
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

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
	"github.com/agentry/agentry/internal/workspace"
)

// ApprovalState is where a person's decision on an approval stands, as the executor acts on it.
// Its zero value (ApprovalNone) means no person was asked.
type ApprovalState string

// Approval states (the values of internal/approval's statuses).
const (
	ApprovalNone     ApprovalState = ""
	ApprovalPending  ApprovalState = "PENDING"
	ApprovalApproved ApprovalState = "APPROVED"
	ApprovalRejected ApprovalState = "REJECTED"
	ApprovalExpired  ApprovalState = "EXPIRED"
)

// Approvals is human-in-the-loop as the executor needs it (internal/app adapts
// internal/approval's service to it).
type Approvals interface {
	// Needs decides whether a call needs a person.
	Needs(s settings.Settings, known, readOnly bool, risk int) bool
	// Request asks a person inside the fenced tx and parks the run AWAITING_APPROVAL.
	Request(ctx context.Context, tx *db.Tx, l run.Lease, kind string, call *dbsqlc.ToolCall, question string, data map[string]any) error
	// ToolCall returns the decision on a call: APPROVED only when the approval is bound to exactly
	// this call (tool name and arguments hash) and was decided before it expired.
	ToolCall(ctx context.Context, tx *db.Tx, call dbsqlc.ToolCall) (ApprovalState, error)
	// Latest returns the newest decision of a kind for the run, its note and its data.
	Latest(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, kind string) (ApprovalState, string, map[string]any, error)
}

// state is what the loop reloads from Postgres before each step.
type state struct {
	run   dbsqlc.Run
	hist  []dbsqlc.Message
	calls []dbsqlc.ToolCall
	newer []dbsqlc.Message
}

var errTimeout = errors.New("attempt timed out (settings.timeoutSeconds)")

// stopped reports whether ctx ended (cancel, timeout) and the outcome that means.
func (a *attempt) stopped(ctx context.Context) (run.Outcome, bool) {
	if ctx.Err() == nil {
		return run.Outcome{}, false
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		return run.Outcome{Status: run.StatusTimedOut, FailureClass: string(llm.Transient), Error: cause.Error(), TerminationReason: "timeout"}, true
	case errors.Is(cause, ErrCancelled):
		return run.Outcome{Status: run.StatusCancelled, Error: "cancelled by the user", TerminationReason: "user_cancel"}, true
	default:
		return run.Outcome{}, false // shutdown or lease lost: another attempt goes on
	}
}

// fromError maps an attempt's failure to an outcome or a retry.
func (a *attempt) fromError(ctx context.Context, err error) result {
	if o, ok := a.stopped(ctx); ok {
		return done(o)
	}
	if errors.Is(err, run.ErrFenced) {
		return result{retry: &Retry{Class: llm.Terminal, Err: err, Fenced: true}}
	}
	if o, ok := budgetOutcome(err); ok {
		return done(o)
	}
	if ctx.Err() != nil {
		return result{outcome: failed(llm.Transient, err), retry: &Retry{Class: llm.Transient, Err: err}}
	}
	le := llm.Classify(err)
	if le.Class == llm.Terminal {
		return done(failed(llm.Terminal, err))
	}
	return result{outcome: failed(le.Class, err), retry: &Retry{Class: le.Class, Err: err, Delay: le.RetryAfter}}
}

// load reads the run, the conversation's context for it, its tool calls and newer user
// messages.
func (a *attempt) load(ctx context.Context) (state, error) {
	var st state
	var err error
	if a.first != nil {
		st, a.first = *a.first, nil // read with the lease (loadFirst)
	} else {
		err = a.e.db.InTx(ctx, a.lease.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
			var err error
			st, err = readState(ctx, tx, a.lease)
			return err
		})
	}
	if err == nil && len(a.earlier) == 0 {
		for _, c := range st.calls {
			if c.Status == run.ToolCallFailed && c.Error != nil {
				a.earlier = append(a.earlier, Failure{Name: c.Name, Args: c.Arguments, Error: *c.Error})
			}
		}
	}
	return st, err
}

// readState reads the leased run (ErrFenced when its attempt moved on), the conversation's
// context for it, its tool calls and newer user messages.
func readState(ctx context.Context, tx *db.Tx, l run.Lease) (state, error) {
	r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: l.Run.TenantID, ID: l.Run.ID})
	if err != nil {
		return state{}, err
	}
	if r.Attempt != l.Attempt || r.Status != run.StatusRunning {
		return state{}, run.ErrFenced
	}
	return readStateOf(ctx, tx, r)
}

// readStateOf is readState of run r as read already.
func readStateOf(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (state, error) {
	st := state{run: r}
	var err error
	if st.hist, err = tx.Q.MessageListContext(ctx, dbsqlc.MessageListContextParams{TenantID: r.TenantID, RunID: r.ID}); err != nil {
		return st, err
	}
	if st.calls, err = tx.Q.ToolCallListByRun(ctx, dbsqlc.ToolCallListByRunParams{TenantID: r.TenantID, RunID: r.ID}); err != nil {
		return st, err
	}
	st.newer, err = tx.Q.MessageListNewerUser(ctx, dbsqlc.MessageListNewerUserParams{TenantID: r.TenantID, RunID: r.ID})
	return st, err
}

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
	if err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
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
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
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
func (a *attempt) recordCall(ctx context.Context, tx *db.Tx, c dbsqlc.ToolCall, output string, runErr error, status string) error {
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
	tx.AfterCommit(func() { a.e.metrics.ToolCall(tool, strings.ToLower(status)) })
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

// insertMessage stores a message of the run at the conversation's next position.
func (a *attempt) insertMessage(ctx context.Context, tx *db.Tx, role string, blocks []llm.Block, callIndex *int32) (dbsqlc.Message, error) {
	r := a.lease.Run
	pos, err := tx.Q.ConversationNextPositions(ctx, dbsqlc.ConversationNextPositionsParams{TenantID: r.TenantID, ID: a.conv.ID, N: 1})
	if err != nil {
		return dbsqlc.Message{}, err
	}
	parts, err := json.Marshal(blocks)
	if err != nil {
		return dbsqlc.Message{}, err
	}
	text := llm.Message{Blocks: blocks}.Text()
	if role == "TOOL" && len(blocks) == 1 {
		text = blocks[0].Content
	}
	return tx.Q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
		TenantID: r.TenantID, ID: uuid.Must(uuid.NewV7()), ConversationID: a.conv.ID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true},
		RunSeq: r.ConversationSeq, Position: pos.MessageCount, Role: role, Content: text, Parts: parts,
		TokenEstimate: int32(contextwin.EstimateMessage(dbsqlc.Message{Role: role, Content: text, Parts: parts})), LlmCallIndex: callIndex,
	})
}

// reflect applies the ErrorClassifier to a step's failures and the breaker's first level.
func (a *attempt) reflect(ctx context.Context, p llm.Provider, m llm.Model, st state, res stepResult) (result, bool) {
	consecutive := int(st.run.ConsecutiveFailures)
	if res.ok > 0 {
		consecutive = 0
	}
	consecutive += len(res.failures)
	decision := ErrorClassifier{}.Classify(res.failures, a.earlier, consecutive)
	a.earlier = append(a.earlier, res.failures...)
	backtracks := int(st.run.Backtracks)
	mustReflect := st.run.MustReflect
	switch decision {
	case Escalate:
		q := "The agent needs your help: " + truncate(res.failures[0].Error, 500) + ". Approve to let it go on (add guidance in the note), or reject to stop the run."
		r := a.suspendFor(ctx, "escalation", nil, q, map[string]any{"failures": res.failures})
		return r, true
	case FailGracefully:
		if err := a.saveBreaker(ctx, consecutive, backtracks, false); err != nil {
			return a.fromError(ctx, err), true
		}
		st.run.ConsecutiveFailures = int32(consecutive)
		return a.summarise(ctx, p, m, st, ReasonFailures, run.StatusFailed), true
	case Backtrack:
		backtracks++
		// A new approach starts: backtrack resets the consecutive failures.
		if err := a.backtrack(ctx, st, res, backtracks); err != nil {
			return a.fromError(ctx, err), true
		}
		if backtracks >= MaxBacktracks {
			return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: ReasonCircuitOpen,
				Error: fmt.Sprintf("circuit open: %d backtracks", backtracks)}), true
		}
		return result{}, false
	}
	if consecutive >= ReflectAfterFailures && consecutive < MaxConsecutiveFailures && !mustReflect && consecutive-len(res.failures) < ReflectAfterFailures {
		mustReflect = true
	}
	if err := a.saveBreaker(ctx, consecutive, backtracks, mustReflect); err != nil {
		return a.fromError(ctx, err), true
	}
	return result{}, false
}

// backtrack takes the failed calls' assistant messages and their results out of the context and
// puts a reflection summary in their place.
func (a *attempt) backtrack(ctx context.Context, st state, res stepResult, backtracks int) error {
	failed := map[uuid.UUID]bool{}
	for _, id := range res.failedIDs {
		failed[id] = true
	}
	// The approach includes earlier attempts at the very same call.
	for _, c := range st.calls {
		for _, f := range res.failures {
			if c.Status == run.ToolCallFailed && c.Name == f.Name && bytes.Equal(compact(c.Arguments), compact(f.Args)) {
				failed[c.ID] = true
			}
		}
	}
	// The assistant messages that made the failed calls, and every result of their calls.
	msgIDs := map[uuid.UUID]bool{}
	callIDs := map[string]bool{}
	for _, c := range st.calls {
		if failed[c.ID] {
			msgIDs[c.MessageID] = true
		}
	}
	for _, c := range st.calls {
		if msgIDs[c.MessageID] {
			callIDs[c.CallID] = true
		}
	}
	var exclude []uuid.UUID
	for id := range msgIDs {
		exclude = append(exclude, id)
	}
	hist, _, err := a.historyAfter(ctx)
	if err != nil {
		return err
	}
	for _, m := range hist {
		if m.Role != "TOOL" {
			continue
		}
		var blocks []llm.Block
		_ = json.Unmarshal(m.Parts, &blocks)
		for _, b := range blocks {
			if callIDs[b.ToolUseID] {
				exclude = append(exclude, m.ID)
				break
			}
		}
	}
	summary := reflectionSummary(res.failures)
	return a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		if err := tx.Q.MessageExclude(ctx, dbsqlc.MessageExcludeParams{TenantID: a.lease.Run.TenantID, Ids: exclude}); err != nil {
			return err
		}
		if _, err := a.insertMessage(ctx, tx, "SYSTEM", []llm.Block{{Type: llm.BlockText, Text: summary}}, nil); err != nil {
			return err
		}
		if err := tx.Q.RunSetBreaker(ctx, dbsqlc.RunSetBreakerParams{TenantID: a.lease.Run.TenantID, ID: a.lease.Run.ID, Attempt: a.lease.Attempt,
			ConsecutiveFailures: 0, Backtracks: int32(backtracks), MustReflect: false}); err != nil {
			return err
		}
		_, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), events.New{Type: events.ExecutionBacktracked, Data: map[string]any{
			"backtracks": backtracks, "summary": summary, "excludedMessages": len(exclude),
		}})
		return err
	})
}

func (a *attempt) historyAfter(ctx context.Context) ([]dbsqlc.Message, []dbsqlc.ToolCall, error) {
	st, err := a.load(ctx)
	return st.hist, st.calls, err
}

// saveBreaker stores the breaker state (and events) in a fenced tx.
func (a *attempt) saveBreaker(ctx context.Context, consecutive, backtracks int, mustReflect bool, news ...events.New) error {
	r := a.lease.Run
	return a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		if err := tx.Q.RunSetBreaker(ctx, dbsqlc.RunSetBreakerParams{TenantID: r.TenantID, ID: r.ID, Attempt: a.lease.Attempt,
			ConsecutiveFailures: int32(consecutive), Backtracks: int32(backtracks), MustReflect: mustReflect}); err != nil {
			return err
		}
		_, err := a.e.pub.Append(ctx, tx, a.lease.Scope(), news...)
		return err
	})
}

// summarise ends the run with a summary of what was done and why it stopped, asked of the
// model without tools; if that fails, a summary is assembled from the run's tool calls.
func (a *attempt) summarise(ctx context.Context, p llm.Provider, m llm.Model, st state, reason, status string) result {
	why := map[string]string{
		ReasonUserStop: "the user asked to stop", ReasonFailures: fmt.Sprintf("%d tool calls in a row failed", MaxConsecutiveFailures),
	}[reason]
	req := llm.Request{Model: m.ID, System: a.systemPrompt(st.run) + "\n\nThe run is stopping because " + why +
		". Summarise briefly what has been done, what is left, and why you stopped. Do not call tools.", Messages: toLLM(st.hist), MaxTokens: 1024}
	calls := max(int(st.run.LlmCalls), a.llmCalls(st.hist))
	resp, err := a.call(ctx, p, req, calls)
	if err == nil {
		resp.Blocks = textOnly(resp.Blocks)
		err = a.persistReply(ctx, p, m, resp, calls, false)
	}
	if err != nil {
		if o, ok := a.stopped(ctx); ok {
			return done(o)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Stopped: %s.", why)
		for _, c := range st.calls {
			fmt.Fprintf(&b, "\n- %s: %s", c.Name, c.Status)
		}
		_ = a.e.runs.InFence(context.WithoutCancel(ctx), a.lease, func(ctx context.Context, tx *db.Tx) error {
			_, err := a.insertMessage(ctx, tx, "SYSTEM", []llm.Block{{Type: llm.BlockText, Text: b.String()}}, nil)
			return err
		})
	}
	o := run.Outcome{Status: status, TerminationReason: reason}
	if status == run.StatusFailed {
		o.FailureClass, o.Error = string(llm.Terminal), "stopped: "+why
		if reason == ReasonFailures {
			o.Data = map[string]any{"decision": string(FailGracefully)}
		}
	}
	return done(o)
}

// suspend parks the run with events (pause).
func (a *attempt) suspend(ctx context.Context, status string, news ...events.New) result {
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		_, err := a.e.runs.Suspend(ctx, tx, a.lease, status, news...)
		return err
	})
	if err != nil {
		return a.fromError(ctx, err)
	}
	return result{suspended: true}
}

// suspendFor asks a person (an approval of kind) and parks the run AWAITING_APPROVAL.
func (a *attempt) suspendFor(ctx context.Context, kind string, call *dbsqlc.ToolCall, question string, data map[string]any) result {
	if a.e.approvals == nil {
		return done(run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), Error: "approval needed but approvals are not configured: " + question, TerminationReason: ReasonEscalated})
	}
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		return a.e.approvals.Request(ctx, tx, a.lease, kind, call, question, data)
	})
	if err != nil {
		return a.fromError(ctx, err)
	}
	return result{suspended: true}
}

func (a *attempt) requestApproval(ctx context.Context, c dbsqlc.ToolCall, risk int) result {
	q := fmt.Sprintf("Allow %s with %s (risk %d)?", c.Name, truncate(string(c.Arguments), 500), risk)
	return a.suspendFor(ctx, "tool_call", &c, q, map[string]any{"risk": risk})
}

// askToContinue pauses a long run for the user's confirmation (an approval of kind continue).
func (a *attempt) askToContinue(ctx context.Context, calls int) result {
	q := fmt.Sprintf("The run has taken %d turns. Continue?", calls)
	return a.suspendFor(ctx, "continue", nil, q, map[string]any{"turns": calls})
}

// confirmedAt is the turn count the user last agreed to go on at (0 when never asked). A
// rejected confirmation ends the run as a user stop, handled by the caller through Latest.
func (a *attempt) confirmedAt(ctx context.Context) int {
	if a.e.approvals == nil || a.limits.ConfirmAfter == 0 {
		return 0
	}
	var state ApprovalState
	var data map[string]any
	_ = a.e.db.InTx(ctx, a.lease.Run.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		state, _, data, err = a.e.approvals.Latest(ctx, tx, a.lease.Run.TenantID, a.lease.Run.ID, "continue")
		return err
	})
	turns, _ := data["turns"].(float64)
	switch state {
	case ApprovalApproved:
		return int(turns)
	case ApprovalRejected, ApprovalExpired:
		return -int(turns) // declined: the caller stops
	}
	return 0
}

// styleInstruction turns the user's personality and verbosity into instructions.
func styleInstruction(s settings.Settings) string {
	p := map[string]string{
		"PRECISE":  "Be precise and factual; prefer exact answers over speculation.",
		"BALANCED": "Be helpful and balanced in tone.",
		"CREATIVE": "Be creative; offer ideas and alternatives.",
		"MINIMAL":  "Be minimal; say only what is needed.",
	}[s.Personality]
	v := map[string]string{
		"MINIMAL": "Answer in as few words as possible.",
		"NORMAL":  "Answer at a normal length.",
		"VERBOSE": "Explain your reasoning and answers in detail.",
		"DEBUG":   "Explain every step you take and why, including tool use, in detail.",
	}[s.Verbosity]
	return strings.TrimSpace(p + " " + v)
}

// park lets a waiting call (wait_subagents) park the run before its step runs: when the step
// is the wait alone, or the wait with calls that only read, and what it waits for has not
// happened, the run is parked WAITING (no worker held) and the step runs once it is resumed. A
// wait in a step with calls that change something runs at once (it answers with where things
// stand), so that nothing of such a step waits on its own effects.
func (a *attempt) park(ctx context.Context, step []dbsqlc.ToolCall) (result, bool) {
	w := a.e.waiter
	if w == nil {
		return result{}, false
	}
	var wait *dbsqlc.ToolCall
	for i, c := range step {
		if w.Waits(c.Name) && (a.limits.AllowTool == nil || a.limits.AllowTool(c.Name)) {
			if wait == nil {
				wait = &step[i]
			}
			continue
		}
		if _, readOnly := a.tools().Info(c.Name); !readOnly {
			return result{}, false
		}
	}
	if wait == nil {
		return result{}, false
	}
	parked := false
	err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
		var err error
		parked, err = w.Park(ctx, tx, a.lease, *wait)
		return err
	})
	if err != nil {
		return a.fromError(ctx, err), true
	}
	if parked {
		return result{suspended: true}, true
	}
	return result{}, false
}
