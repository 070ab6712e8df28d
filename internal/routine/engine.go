package routine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/status"
)

// Event types of routine runs (on the routine run's durable stream).
const (
	EventPhaseStarted   = "routine.phase_started"
	EventPhaseCompleted = "routine.phase_completed"
	EventPhaseFailed    = "routine.phase_failed"
	EventStatusChanged  = "routine.status_changed"
	EventRetryScheduled = "routine.retry_scheduled"
	EventCompleted      = "routine.completed"
	EventFailed         = "routine.failed"
	EventStepStarted    = "step.started"
	EventStepCompleted  = "step.completed"
	EventStepWarning    = "step.warning"
	EventStepFailed     = "step.failed"
)

// Task statuses a routine run moves its task through (internal/task's names).
const (
	taskOpen       status.Task = "OPEN"
	taskInProgress status.Task = "IN_PROGRESS"
	taskDone       status.Task = "DONE"
)

// StepArgs is the River job that moves a routine run on: ids only. It is inserted when the run
// starts and when one of its step runs ends; each job works the run until it waits (for a step
// run, or snoozed for a cron step's next evaluation) or ends.
type StepArgs struct {
	TenantID uuid.UUID `json:"tenant_id"`
	RunID    uuid.UUID `json:"run_id"`
}

// Kind names the job.
func (StepArgs) Kind() string { return "routine_step" }

// Inserter is what the routine service needs of River's client.
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// SetInserter connects River's client. It stays a setter: the client is built from the workers,
// which need this service, so it exists only after NewService.
func (s *Service) SetInserter(jobs Inserter) { s.jobs = jobs }

// definition is the routine as a run sees it: a copy taken when the run starts, roles included,
// so that saving the routine or a role meanwhile does not change a run under way.
type definition struct {
	RoutineID  uuid.UUID           `json:"routineId"`
	Name       string              `json:"name"`
	ProjectID  uuid.UUID           `json:"projectId"`
	MaxRetries int                 `json:"maxRetries"`
	Steps      []Step              `json:"steps"`
	Edges      []Edge              `json:"edges"`
	Roles      map[string]roleCopy `json:"roles"`
}

type roleCopy struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Color           string            `json:"color"`
	SystemPrompt    string            `json:"systemPrompt"`
	DeveloperPrompt string            `json:"developerPrompt"`
	Model           string            `json:"model"`
	Templates       map[string]string `json:"templates"`
	Tools           []string          `json:"tools"`
	AllTools        bool              `json:"allTools"`
}

func (d definition) step(key string) (Step, bool) {
	for _, st := range d.Steps {
		if st.Key == key {
			return st, true
		}
	}
	return Step{}, false
}

func (d definition) entry() Step {
	for _, st := range d.Steps {
		if st.Entry {
			return st
		}
	}
	return d.Steps[0]
}

// Run starts a routine by hand: runRoutine(id, taskId?, input?). MEMBER or higher. A task that
// is DONE, or already worked by a run that has not ended, is CONFLICT.
func (s *Service) Run(ctx context.Context, id, taskID uuid.UUID, input string) (dbsqlc.Run, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Run{}, err
	}
	if len(input) > 50000 {
		return dbsqlc.Run{}, apperr.Invalid("input", "must be at most 50000 characters")
	}
	var out dbsqlc.Run
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		rt, err := tx.Q.RoutineGet(ctx, dbsqlc.RoutineGetParams{TenantID: a.TenantID, ID: id})
		if db.IsNoRows(err) {
			return apperr.NotFoundf("routine")
		}
		if err != nil {
			return err
		}
		var task *dbsqlc.Task
		if taskID != uuid.Nil {
			t, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: a.TenantID, ID: taskID})
			if db.IsNoRows(err) {
				return apperr.NotFoundf("task")
			}
			if err != nil {
				return err
			}
			if t.Status == taskDone {
				return apperr.New(apperr.Conflict, "the task is done; set its status back to run it again")
			}
			if active, err := tx.Q.TaskActiveRun(ctx, dbsqlc.TaskActiveRunParams{TenantID: a.TenantID, TaskID: uuid.NullUUID{UUID: t.ID, Valid: true}}); err == nil {
				return apperr.New(apperr.Conflict, "the task already has a %s run", active.Status).With("activeRunId", active.ID.String())
			} else if !db.IsNoRows(err) {
				return err
			}
			task = &t
		}
		if s.admit != nil {
			if err := s.admit.Admit(ctx, tx, a.TenantID, a.UserID); err != nil {
				return err
			}
		}
		out, err = s.start(ctx, tx, a.UserID, rt, task, input, nil)
		return err
	})
	return out, err
}

// TaskReady starts the project's first active TASK_READY routine on a task that became READY,
// in the transaction of the status change (task.Service calls it). Without such a routine it
// does nothing.
func (s *Service) TaskReady(ctx context.Context, tx *db.Tx, userID uuid.UUID, t dbsqlc.Task) error {
	rts, err := tx.Q.RoutineListTaskReady(ctx, dbsqlc.RoutineListTaskReadyParams{TenantID: t.TenantID, ProjectID: t.ProjectID})
	if err != nil || len(rts) == 0 {
		return err
	}
	if _, err := tx.Q.TaskActiveRun(ctx, dbsqlc.TaskActiveRunParams{TenantID: t.TenantID, TaskID: uuid.NullUUID{UUID: t.ID, Valid: true}}); err == nil {
		return nil // already worked on
	} else if !db.IsNoRows(err) {
		return err
	}
	_, err = s.start(ctx, tx, userID, rts[0], &t, "", nil)
	return err
}

var errTickFired = errors.New("this cron tick fired already")

// start makes a routine run inside tx: the run (kind ROUTINE, QUEUED), its definition and
// RoutineContext, task.queued, the task moved to IN_PROGRESS (routine.status_changed), and the
// run's first job.
func (s *Service) start(ctx context.Context, tx *db.Tx, userID uuid.UUID, rt dbsqlc.Routine, task *dbsqlc.Task, input string, tick *time.Time) (dbsqlc.Run, error) {
	tenantID := rt.TenantID
	def := definition{RoutineID: rt.ID, Name: rt.Name, ProjectID: rt.ProjectID, MaxRetries: int(rt.MaxRetries),
		Steps: DecodeSteps(rt.Steps), Edges: DecodeEdges(rt.Edges), Roles: map[string]roleCopy{}}
	if len(def.Steps) == 0 {
		return dbsqlc.Run{}, apperr.New(apperr.Conflict, "the routine has no steps")
	}
	roles, err := tx.Q.RoleList(ctx, tenantID)
	if err != nil {
		return dbsqlc.Run{}, err
	}
	for _, r := range roles {
		def.Roles[r.ID.String()] = roleCopy{ID: r.ID.String(), Name: r.Name, Color: r.Color, SystemPrompt: r.SystemPrompt,
			DeveloperPrompt: deref(r.DeveloperPrompt), Model: deref(r.Model), Templates: DecodeTemplates(r.Templates), Tools: r.Tools, AllTools: r.Tools == nil}
	}
	project, err := tx.Q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: tenantID, ID: rt.ProjectID})
	if err != nil {
		return dbsqlc.Run{}, fmt.Errorf("load project: %w", err)
	}
	runID := uuid.Must(uuid.NewV7())
	var taskRef uuid.NullUUID
	c := Context{
		RoutineID: rt.ID.String(), RoutineName: rt.Name, ProjectID: rt.ProjectID.String(),
		Project: ProjectInfo{Name: project.Name, Description: project.Description}, Input: input,
		MaxRetries: int(rt.MaxRetries), StepResults: map[string]StepResult{}, ExecutionRunID: runID.String(),
		IsCronTrigger: tick != nil,
	}
	if task != nil {
		taskRef = uuid.NullUUID{UUID: task.ID, Valid: true}
		c.TaskID = task.ID.String()
		c.Task = taskInfo(*task)
	}
	r, err := tx.Q.RoutineRunInsert(ctx, dbsqlc.RoutineRunInsertParams{TenantID: tenantID, ID: runID, UserID: userID, TaskID: taskRef})
	if err != nil {
		return r, fmt.Errorf("insert routine run: %w", err)
	}
	defJSON, err := json.Marshal(def)
	if err != nil {
		return r, err
	}
	ctxJSON, err := json.Marshal(c)
	if err != nil {
		return r, err
	}
	if _, err := tx.Q.RoutineRunStateInsert(ctx, dbsqlc.RoutineRunStateInsertParams{
		TenantID: tenantID, RunID: runID, RoutineID: uuid.NullUUID{UUID: rt.ID, Valid: true}, Definition: defJSON, Context: ctxJSON, CronTick: tick,
	}); err != nil {
		if db.IsNoRows(err) {
			return r, errTickFired
		}
		return r, fmt.Errorf("insert routine run state: %w", err)
	}
	news := []events.New{{Type: events.TaskQueued, Data: map[string]any{"kind": r.Kind, "routineId": rt.ID, "taskId": nullable(taskRef), "queuedBehind": nil}}}
	if task != nil && task.Status != taskInProgress {
		if _, err := tx.Q.TaskSetStatus(ctx, dbsqlc.TaskSetStatusParams{TenantID: tenantID, ID: task.ID, Status: taskInProgress}); err != nil {
			return r, fmt.Errorf("set task status: %w", err)
		}
		news = append(news, events.New{Type: EventStatusChanged, Data: map[string]any{"taskId": task.ID, "from": task.Status, "to": taskInProgress}})
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(r), news...); err != nil {
		return r, err
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, StepArgs{TenantID: tenantID, RunID: runID}, nil); err != nil {
		return r, fmt.Errorf("enqueue routine run: %w", err)
	}
	return r, nil
}

func taskInfo(t dbsqlc.Task) TaskInfo {
	return TaskInfo{Title: t.Title, Description: deref(t.Description), AcceptanceCriteria: deref(t.AcceptanceCriteria), Tags: t.Tags,
		Source: t.Source, Status: string(t.Status), Priority: t.Priority, Type: t.Type, Slug: t.Slug, Complexity: t.Complexity}
}

// state is a routine run's row, decoded.
type state struct {
	row        dbsqlc.RoutineRun
	run        dbsqlc.Run
	def        definition
	ctx        Context
	executions map[string]int
}

func (s *Service) loadState(ctx context.Context, tx *db.Tx, tenantID, runID uuid.UUID, lock bool) (*state, error) {
	var row dbsqlc.RoutineRun
	var err error
	if lock {
		row, err = tx.Q.RoutineRunStateGetForUpdate(ctx, dbsqlc.RoutineRunStateGetForUpdateParams{TenantID: tenantID, RunID: runID})
	} else {
		row, err = tx.Q.RoutineRunStateGet(ctx, dbsqlc.RoutineRunStateGetParams{TenantID: tenantID, RunID: runID})
	}
	if err != nil {
		return nil, err
	}
	st := &state{row: row, executions: map[string]int{}}
	if lock {
		st.run, err = tx.Q.RoutineRunForUpdate(ctx, dbsqlc.RoutineRunForUpdateParams{TenantID: tenantID, ID: runID})
	} else {
		st.run, err = tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: tenantID, ID: runID})
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(row.Definition, &st.def); err != nil {
		return nil, fmt.Errorf("decode definition: %w", err)
	}
	if err := json.Unmarshal(row.Context, &st.ctx); err != nil {
		return nil, fmt.Errorf("decode context: %w", err)
	}
	_ = json.Unmarshal(row.Executions, &st.executions)
	if st.ctx.StepResults == nil {
		st.ctx.StepResults = map[string]StepResult{}
	}
	return st, nil
}

func (s *Service) save(ctx context.Context, tx *db.Tx, st *state) error {
	c, err := json.Marshal(st.ctx)
	if err != nil {
		return err
	}
	ex, err := json.Marshal(st.executions)
	if err != nil {
		return err
	}
	r := st.row
	return tx.Q.RoutineRunStateSave(ctx, dbsqlc.RoutineRunStateSaveParams{
		TenantID: r.TenantID, RunID: r.RunID, Context: c, CurrentStep: r.CurrentStep, Execution: r.Execution, Evaluation: r.Evaluation,
		StepStartedAt: r.StepStartedAt, Phase: r.Phase, PhaseStart: r.PhaseStart, Retries: r.Retries, Executions: ex,
	})
}

// StepWorker works StepArgs.
type StepWorker struct {
	river.WorkerDefaults[StepArgs]
	s *Service
}

// NewStepWorker returns the worker of routine runs.
func NewStepWorker(s *Service) *StepWorker { return &StepWorker{s: s} }

// Timeout bounds one job: its transitions are short (a lambda is capped at seconds).
func (w *StepWorker) Timeout(*river.Job[StepArgs]) time.Duration { return 5 * time.Minute }

// Work moves the routine run on until it waits or ends. Every transition (a step's result
// stored, the context saved, the next step chosen, the events) commits in one transaction
// holding the routine run's row lock, so a worker killed anywhere repeats nothing that
// committed: the job is retried and goes on from the stored state.
func (w *StepWorker) Work(ctx context.Context, job *river.Job[StepArgs]) error {
	for range 1000 {
		next, err := w.s.advance(ctx, job.Args.TenantID, job.Args.RunID)
		if err != nil {
			return err
		}
		switch {
		case next.snooze > 0:
			return river.JobSnooze(next.snooze)
		case next.stop:
			return nil
		}
	}
	return errors.New("routine run did not settle within 1000 transitions")
}

// advanced says what the worker does after a transition.
type advanced struct {
	stop   bool          // the run waits for a step run, or ended
	snooze time.Duration // a cron step waits this long for its next evaluation
}

// precomputed is a lambda's outcome, computed outside the transaction (it may take seconds).
type precomputed struct {
	key       string
	execution int32
	out       outcome
}

// advance makes one transition of a routine run.
func (s *Service) advance(ctx context.Context, tenantID, runID uuid.UUID) (advanced, error) {
	var pre *precomputed
	// A lambda step runs outside the transaction, then its result is stored in one.
	err := s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		st, err := s.loadState(ctx, tx, tenantID, runID, false)
		if err != nil {
			return err
		}
		if run.IsTerminal(st.run.Status) || st.row.CurrentStep == nil {
			return nil
		}
		step, ok := st.def.step(*st.row.CurrentStep)
		if !ok || step.Type != StepLambda {
			return nil
		}
		c := st.ctx
		c.Step = StepInfo{Name: step.Name, Metadata: metadata(step)}
		script, _ := step.Config["script"].(string)
		started := time.Now()
		res, lerr := s.lambda.Run(ctx, script, c)
		o := outcome{durationMs: time.Since(started).Milliseconds()}
		if errors.Is(lerr, errChild) || ctx.Err() != nil {
			return lerr
		}
		if lerr != nil {
			o.output = "lambda stopped: " + lerr.Error()
		} else {
			o.passed, o.output, o.data = res.Passed, res.Output, res.Data
		}
		pre = &precomputed{key: step.Key, execution: st.row.Execution, out: o}
		return nil
	})
	if err != nil {
		return advanced{}, err
	}
	var next advanced
	err = s.db.InTx(ctx, tenantID, func(ctx context.Context, tx *db.Tx) error {
		st, err := s.loadState(ctx, tx, tenantID, runID, true)
		if err != nil {
			return err
		}
		next, err = s.transition(ctx, tx, st, pre)
		return err
	})
	return next, err
}

// outcome is how a step execution went.
type outcome struct {
	passed       bool
	output       string
	data         map[string]any
	inputTokens  int64
	outputTokens int64
	durationMs   int64
	// abort ends the routine: no ON_FAIL edge is followed and no retry made.
	abort bool
}

func (s *Service) transition(ctx context.Context, tx *db.Tx, st *state, pre *precomputed) (advanced, error) {
	r := st.run
	if run.IsTerminal(r.Status) {
		return advanced{stop: true}, nil
	}
	if r.CancelRequested {
		return advanced{stop: true}, s.finish(ctx, tx, st, run.Outcome{Status: run.StatusCancelled, TerminationReason: run.ReasonUserCancel, Error: "cancelled by the user"})
	}
	if r.Status == run.StatusPaused {
		return advanced{stop: true}, nil // resumeRun enqueues the run's job again
	}
	if r.StopRequested {
		// stopRun: the step in flight has finished (this transition follows its end); no other starts.
		return advanced{stop: true}, s.finish(ctx, tx, st, run.Outcome{Status: run.StatusCompleted, TerminationReason: "user_stop"})
	}
	if r.Status == run.StatusQueued {
		started, err := tx.Q.RoutineRunStart(ctx, dbsqlc.RoutineRunStartParams{TenantID: r.TenantID, ID: r.ID})
		if err != nil {
			return advanced{}, fmt.Errorf("start routine run: %w", err)
		}
		st.run = started
		if st.row.CurrentStep != nil {
			return advanced{}, nil // resumed after a pause: go on where it stopped
		}
		if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(started), run.StartedEvents(started.Kind, 1)...); err != nil {
			return advanced{}, err
		}
		if err := s.enter(ctx, tx, st, st.def.entry()); err != nil {
			return advanced{}, err
		}
		return advanced{}, s.save(ctx, tx, st)
	}
	step, ok := st.def.step(deref(st.row.CurrentStep))
	if !ok {
		return advanced{stop: true}, s.finish(ctx, tx, st, failedOutcome("the routine run's current step is gone"))
	}
	// pauseRun parks the run before a step starts (a step in flight finishes first).
	if r.PauseRequested && r.Status == run.StatusRunning {
		started := false
		if step.Type == StepAgent || step.Type == StepGate || step.Type == StepCron {
			_, err := tx.Q.RoutineStepRunGet(ctx, dbsqlc.RoutineStepRunGetParams{TenantID: r.TenantID, RoutineRunID: r.ID, StepKey: step.Key, Execution: st.row.Execution, Evaluation: st.row.Evaluation})
			if err != nil && !db.IsNoRows(err) {
				return advanced{}, err
			}
			started = err == nil
		}
		if !started {
			if _, err := s.runs.Suspend(ctx, tx, run.Lease{Run: r, Attempt: r.Attempt}, run.StatusPaused,
				events.New{Type: events.ExecutionPaused, Data: map[string]any{"reason": "paused by the user", "step": step.Key}}); err != nil {
				return advanced{}, err
			}
			return advanced{stop: true}, nil
		}
	}
	switch step.Type {
	case StepTerminal, StepTerminalFail:
		passed := step.Type == StepTerminal
		res, err := s.storeResult(ctx, tx, st, step, outcome{passed: passed})
		if err != nil {
			return advanced{}, err
		}
		st.ctx.StepResults[step.Key] = res
		if err := s.append(ctx, tx, st, s.stepEvent(st, step, EventStepCompleted, outcome{passed: passed})); err != nil {
			return advanced{}, err
		}
		if err := s.leavePhase(ctx, tx, st, "", passed); err != nil {
			return advanced{}, err
		}
		if passed {
			return advanced{stop: true}, s.finish(ctx, tx, st, run.Outcome{Status: run.StatusCompleted, TerminationReason: agent.ReasonCompleted})
		}
		return advanced{stop: true}, s.finish(ctx, tx, st, failedOutcome(fmt.Sprintf("the routine reached %s (%s)", step.Name, step.Type)))
	case StepLambda:
		if pre == nil || pre.key != step.Key || pre.execution != st.row.Execution {
			return advanced{}, nil // moved on meanwhile: look again
		}
		return s.complete(ctx, tx, st, step, pre.out)
	default: // AGENT, GATE, CRON: a step run per execution (per evaluation for CRON)
		sr, err := tx.Q.RoutineStepRunGet(ctx, dbsqlc.RoutineStepRunGetParams{TenantID: r.TenantID, RoutineRunID: r.ID, StepKey: step.Key, Execution: st.row.Execution, Evaluation: st.row.Evaluation})
		if db.IsNoRows(err) {
			return s.startStepRun(ctx, tx, st, step)
		}
		if err != nil {
			return advanced{}, err
		}
		if !run.IsTerminal(sr.Status) {
			return advanced{stop: true}, nil // its end wakes this run
		}
		o, wait, err := s.judge(ctx, tx, st, step, sr)
		if err != nil {
			return advanced{}, err
		}
		if wait > 0 {
			st.row.Evaluation++
			return advanced{snooze: wait}, s.save(ctx, tx, st)
		}
		return s.complete(ctx, tx, st, step, o)
	}
}

// judge reads how a step run went: an AGENT step passes when its run completed; a GATE step by
// its gate_verdict; a CRON evaluation by its cron_signal (wait > 0: look again after that long).
func (s *Service) judge(ctx context.Context, tx *db.Tx, st *state, step Step, sr dbsqlc.Run) (o outcome, wait time.Duration, err error) {
	tenantID := st.run.TenantID
	tokens, err := tx.Q.RoutineStepRunsTokens(ctx, dbsqlc.RoutineStepRunsTokensParams{TenantID: tenantID, RoutineRunID: st.run.ID, StepKey: step.Key, Execution: st.row.Execution})
	if err != nil {
		return o, 0, err
	}
	o.inputTokens, o.outputTokens = tokens.InputTokens, tokens.OutputTokens
	if st.row.StepStartedAt != nil {
		o.durationMs = time.Since(*st.row.StepStartedAt).Milliseconds()
	}
	reply := ""
	if m, err := tx.Q.RunLastReply(ctx, dbsqlc.RunLastReplyParams{TenantID: tenantID, RunID: sr.ID}); err == nil {
		reply = m.Content
	} else if !db.IsNoRows(err) {
		return o, 0, err
	}
	if sr.Status != run.StatusCompleted {
		o.output = fmt.Sprintf("the step's run ended %s: %s", sr.Status, deref(sr.Error))
		return o, 0, nil
	}
	switch step.Type {
	case StepAgent:
		o.passed, o.output = true, reply
	case StepGate:
		call, err := tx.Q.RoutineLastToolCall(ctx, dbsqlc.RoutineLastToolCallParams{TenantID: tenantID, RunID: sr.ID, Name: GateVerdictTool})
		if db.IsNoRows(err) {
			o.output = "the gate gave no verdict (it must call " + GateVerdictTool + ")"
			return o, 0, nil
		}
		if err != nil {
			return o, 0, err
		}
		var v Verdict
		_ = json.Unmarshal(call.Arguments, &v)
		o.passed, o.output = v.Passed, v.Feedback
	case StepCron:
		sig := Signal{Status: "wait"}
		call, err := tx.Q.RoutineLastToolCall(ctx, dbsqlc.RoutineLastToolCallParams{TenantID: tenantID, RunID: sr.ID, Name: CronSignalTool})
		if err == nil {
			_ = json.Unmarshal(call.Arguments, &sig)
		} else if !db.IsNoRows(err) {
			return o, 0, err
		}
		o.output = sig.Output
		switch sig.Status {
		case "pass":
			o.passed = true
		case "fail":
		case "abort":
			o.abort = true
		default:
			timeout := configDuration(step, "timeoutSeconds", DefaultCronTimeout)
			if st.row.StepStartedAt != nil && time.Since(*st.row.StepStartedAt) >= timeout {
				o.output = fmt.Sprintf("no pass or fail within the step's timeout of %s", timeout)
				return o, 0, nil
			}
			return o, configDuration(step, "intervalSeconds", DefaultCronInterval), nil
		}
	}
	return o, 0, nil
}

func configDuration(step Step, key string, def time.Duration) time.Duration {
	if f, ok := step.Config[key].(float64); ok && f >= 1 {
		return time.Duration(f) * time.Second
	}
	return def
}

// complete stores a step execution's result, updates the context and moves to the next step:
// the first edge whose condition holds, else (failed) a retry of the phase, else the end.
func (s *Service) complete(ctx context.Context, tx *db.Tx, st *state, step Step, o outcome) (advanced, error) {
	role := st.def.Roles[step.RoleID]
	if tmpl := outputTemplate(role, step.Type, o.passed); tmpl != "" {
		if text, err := Render(tmpl, st.ctx, map[string]any{"output": o.output}); err == nil {
			o.output = text
		}
	}
	res, err := s.storeResult(ctx, tx, st, step, o)
	if err != nil {
		return advanced{}, err
	}
	st.ctx.StepResults[step.Key] = res
	if !o.passed && (step.Type == StepGate || step.Type == StepCron || step.Type == StepLambda) {
		st.ctx.GateFeedback = o.output
		st.ctx.TaskSource = role.Name
		if step.Type == StepLambda {
			st.ctx.TaskSource = step.Name
		}
	}
	if o.passed && step.Type == StepAgent {
		st.ctx.GateFeedback, st.ctx.TaskSource = "", "" // consumed by the agent that worked on it
	}
	var edge *Edge
	if !o.abort {
		for _, e := range st.def.Edges {
			if e.From != step.Key {
				continue
			}
			if e.Condition == Always || (e.Condition == OnPass && o.passed) || (e.Condition == OnFail && !o.passed) {
				edge = &e
				break
			}
		}
	}
	switch {
	case o.passed:
		if err := s.append(ctx, tx, st, s.stepEvent(st, step, EventStepCompleted, o)); err != nil {
			return advanced{}, err
		}
	case edge != nil:
		if err := s.append(ctx, tx, st, s.stepEvent(st, step, EventStepWarning, o)); err != nil {
			return advanced{}, err
		}
	default:
		if err := s.append(ctx, tx, st, s.stepEvent(st, step, EventStepFailed, o)); err != nil {
			return advanced{}, err
		}
		return s.failPhase(ctx, tx, st, step, o)
	}
	if edge == nil {
		// Passed with no way on: the routine ends here.
		if err := s.leavePhase(ctx, tx, st, "", true); err != nil {
			return advanced{}, err
		}
		return advanced{stop: true}, s.finish(ctx, tx, st, run.Outcome{Status: run.StatusCompleted, TerminationReason: agent.ReasonCompleted})
	}
	next, _ := st.def.step(edge.To)
	if st.executions[next.Key] > st.def.MaxRetries {
		msg := fmt.Sprintf("step %s would run a %d. time: maxRetries (%d) bounds every cycle", next.Key, st.executions[next.Key]+1, st.def.MaxRetries)
		return advanced{stop: true}, s.finish(ctx, tx, st, failedOutcome(msg))
	}
	if next.Phase != deref(st.row.Phase) {
		if err := s.leavePhase(ctx, tx, st, next.Phase, o.passed); err != nil {
			return advanced{}, err
		}
	}
	if err := s.enter(ctx, tx, st, next); err != nil {
		return advanced{}, err
	}
	return advanced{}, s.save(ctx, tx, st)
}

// failPhase handles a step that failed with no way on: the phase is retried from its first
// step while retries remain (routine.retry_scheduled), else the routine fails.
func (s *Service) failPhase(ctx context.Context, tx *db.Tx, st *state, step Step, o outcome) (advanced, error) {
	phase := deref(st.row.Phase)
	if phase != "" {
		if err := s.append(ctx, tx, st, events.New{Type: EventPhaseFailed, Phase: phase, Data: map[string]any{"phase": phase, "step": step.Key, "error": o.output}}); err != nil {
			return advanced{}, err
		}
	}
	if o.abort || int(st.row.Retries) >= st.def.MaxRetries {
		msg := fmt.Sprintf("step %s failed: %s", step.Key, o.output)
		if !o.abort {
			msg += fmt.Sprintf(" (after %d retries)", st.row.Retries)
		}
		return advanced{stop: true}, s.finish(ctx, tx, st, failedOutcome(msg))
	}
	st.row.Retries++
	from := step
	if phase != "" && st.row.PhaseStart != nil {
		from, _ = st.def.step(*st.row.PhaseStart)
	}
	if err := s.append(ctx, tx, st, events.New{Type: EventRetryScheduled, Phase: phase, Data: map[string]any{
		"phase": nullable(phase), "step": from.Key, "retry": st.row.Retries, "maxRetries": st.def.MaxRetries, "error": o.output,
	}}); err != nil {
		return advanced{}, err
	}
	if phase != "" {
		if err := s.append(ctx, tx, st, events.New{Type: EventPhaseStarted, Phase: phase, Data: map[string]any{"phase": phase, "step": from.Key, "retry": st.row.Retries}}); err != nil {
			return advanced{}, err
		}
	}
	if err := s.enterStep(ctx, tx, st, from); err != nil {
		return advanced{}, err
	}
	return advanced{}, s.save(ctx, tx, st)
}

// enter moves the run to step, starting its phase when it has another.
func (s *Service) enter(ctx context.Context, tx *db.Tx, st *state, step Step) error {
	if step.Phase != "" && step.Phase != deref(st.row.Phase) {
		if err := s.append(ctx, tx, st, events.New{Type: EventPhaseStarted, Phase: step.Phase, Data: map[string]any{"phase": step.Phase, "step": step.Key}}); err != nil {
			return err
		}
		st.row.PhaseStart = &step.Key
	}
	if step.Phase == "" {
		st.row.PhaseStart = nil
	}
	st.row.Phase = nilIfEmpty(step.Phase)
	return s.enterStep(ctx, tx, st, step)
}

// enterStep makes step the current one, with its next execution count.
func (s *Service) enterStep(ctx context.Context, tx *db.Tx, st *state, step Step) error {
	st.executions[step.Key]++
	st.row.CurrentStep = &step.Key
	st.row.Execution = int32(st.executions[step.Key])
	st.row.Evaluation = 1
	now := time.Now()
	st.row.StepStartedAt = &now
	st.ctx.Step = StepInfo{Name: step.Name, Metadata: metadata(step)}
	if step.Type == StepAgent || step.Type == StepGate || step.Type == StepCron {
		return nil // step.started goes out with its run
	}
	return s.append(ctx, tx, st, s.stepEvent(st, step, EventStepStarted, outcome{}))
}

// leavePhase ends the current phase (if any) before the run moves to next (a phase, or "").
func (s *Service) leavePhase(ctx context.Context, tx *db.Tx, st *state, next string, passed bool) error {
	cur := deref(st.row.Phase)
	if cur == "" || cur == next {
		return nil
	}
	typ := EventPhaseCompleted
	if !passed {
		typ = EventPhaseFailed
	}
	return s.append(ctx, tx, st, events.New{Type: typ, Phase: cur, Data: map[string]any{"phase": cur}})
}

// startStepRun makes the run of an AGENT or GATE step execution, or of a CRON step's
// evaluation: a conversation with the role's prompts and model, a run of kind ROUTINE whose
// trigger message is the rendered prompt, and its job.
func (s *Service) startStepRun(ctx context.Context, tx *db.Tx, st *state, step Step) (advanced, error) {
	wait := advanced{stop: true}
	r := st.run
	role := st.def.Roles[step.RoleID]
	prompt, err := Render(promptTemplate(role, step, st.ctx), st.ctx, nil)
	if err != nil {
		// The step fails without a run (step.failed, or step.warning with an ON_FAIL edge).
		if err := s.append(ctx, tx, st, s.stepEvent(st, step, EventStepStarted, outcome{})); err != nil {
			return advanced{}, err
		}
		return s.complete(ctx, tx, st, step, outcome{output: "cannot render the step's prompt: " + err.Error()})
	}
	switch step.Type {
	case StepGate:
		results, err := tx.Q.RoutineStepResultList(ctx, dbsqlc.RoutineStepResultListParams{TenantID: r.TenantID, RunID: r.ID})
		if err != nil {
			return advanced{}, err
		}
		if n := len(results); n > 0 {
			last := results[n-1]
			prompt += fmt.Sprintf("\n\nThe most recent result (step %s, %s):\n%s", last.StepName, passedWord(last.Passed), deref(last.Output))
		}
		prompt += "\n\nGive your verdict by calling " + GateVerdictTool + " with passed (true or false) and feedback; then answer with one line."
	case StepCron:
		prompt += "\n\nCall " + CronSignalTool + " with status pass, fail, wait or abort and an output saying why; then answer with one line."
	}
	system := role.SystemPrompt
	if role.DeveloperPrompt != "" {
		system += "\n\n" + role.DeveloperPrompt
	}
	model := role.Model
	if model == "" {
		model = s.models.Default()
	}
	title := fmt.Sprintf("Routine %s: %s", st.def.Name, step.Name)
	if len(title) > 400 {
		title = title[:400]
	}
	own, err := s.runs.CreateOwn(ctx, tx, run.Own{
		TenantID: r.TenantID, UserID: r.UserID, ProjectID: st.def.ProjectID, ConversationKind: "ROUTINE",
		Title: title, Model: model, SystemPrompt: system, Kind: run.KindRoutine,
		MaxAttempts: int32(DefaultMaxRetries + 1), Prompt: prompt, Queued: map[string]any{"routineRunId": r.ID},
	})
	if err != nil {
		return advanced{}, err
	}
	sr, runID := own.Run, own.Run.ID
	if err := tx.Q.RoutineStepRunInsertLink(ctx, dbsqlc.RoutineStepRunInsertLinkParams{
		TenantID: r.TenantID, StepRunID: runID, RoutineRunID: r.ID, StepKey: step.Key, StepType: step.Type,
		Execution: st.row.Execution, Evaluation: st.row.Evaluation,
	}); err != nil {
		return advanced{}, fmt.Errorf("link step run: %w", err)
	}
	if err := s.runs.Enqueue(ctx, tx, sr); err != nil {
		return advanced{}, err
	}
	if st.row.Evaluation <= 1 {
		ev := s.stepEvent(st, step, EventStepStarted, outcome{})
		ev.Data.(map[string]any)["stepRunId"] = runID
		if err := s.append(ctx, tx, st, ev); err != nil {
			return advanced{}, err
		}
	}
	return wait, s.save(ctx, tx, st)
}

// Default prompt templates, used when neither the step (config.prompt) nor its role has one.
const (
	defaultTaskTemplate = `{% if task.title %}Task: {{ task.title }}
{% if task.description %}{{ task.description }}
{% endif %}{% if task.acceptance_criteria %}Acceptance criteria:
{{ task.acceptance_criteria }}
{% endif %}{% else %}{{ input }}
{% endif %}{% if gate_feedback %}
Feedback from {{ task_source }} on the previous attempt:
{{ gate_feedback }}
{% endif %}`
	defaultGateTemplate = `Evaluate the most recent result of the routine {{ routine_name }}{% if task.title %} on the task "{{ task.title }}"{% endif %}.{% if task.acceptance_criteria %}
Acceptance criteria:
{{ task.acceptance_criteria }}{% endif %}`
	defaultCronTemplate = `Check whether what the step "{{ step.name }}" of the routine {{ routine_name }} waits for has happened.`
)

// promptTemplate chooses a step's prompt: the step's config.prompt, else its role's template for
// the step (gate_eval, cron_task; for an agent step cron_task on a cron trigger, task_task with
// a task, chat_task without), else a default.
func promptTemplate(role roleCopy, step Step, c Context) string {
	if p, ok := step.Config["prompt"].(string); ok && strings.TrimSpace(p) != "" {
		return p
	}
	name := "task_task"
	switch {
	case step.Type == StepGate:
		name = "gate_eval"
	case step.Type == StepCron || c.IsCronTrigger:
		name = "cron_task"
	case c.TaskID == "":
		name = "chat_task"
	}
	if t := role.Templates[name]; strings.TrimSpace(t) != "" {
		return t
	}
	switch step.Type {
	case StepGate:
		return defaultGateTemplate
	case StepCron:
		return defaultCronTemplate
	}
	return defaultTaskTemplate
}

func outputTemplate(role roleCopy, typ string, passed bool) string {
	switch {
	case typ == StepAgent:
		return role.Templates["agent_done"]
	case typ == StepGate && passed:
		return role.Templates["gate_pass"]
	case typ == StepGate:
		return role.Templates["gate_fail"]
	}
	return ""
}

// storeResult stores the StepResult of the current execution (once: a repeat keeps the first).
func (s *Service) storeResult(ctx context.Context, tx *db.Tx, st *state, step Step, o outcome) (StepResult, error) {
	data, err := json.Marshal(o.data)
	if err != nil {
		return StepResult{}, err
	}
	var roleID uuid.NullUUID
	if id, err := uuid.Parse(step.RoleID); err == nil {
		roleID = uuid.NullUUID{UUID: id, Valid: true}
	}
	_, err = tx.Q.RoutineStepResultInsert(ctx, dbsqlc.RoutineStepResultInsertParams{
		TenantID: st.run.TenantID, RunID: st.run.ID, StepKey: step.Key, Execution: st.row.Execution, StepName: step.Name,
		StepType: step.Type, RoleID: roleID, Passed: o.passed, Output: nilIfEmpty(o.output), Data: data,
		InputTokens: o.inputTokens, OutputTokens: o.outputTokens, DurationMs: int32(min(o.durationMs, 1<<31-1)),
	})
	if err != nil && !db.IsNoRows(err) {
		return StepResult{}, fmt.Errorf("store step result: %w", err)
	}
	return StepResult{StepID: step.Key, StepName: step.Name, Passed: o.passed, Output: o.output, Data: o.data,
		InputTokens: o.inputTokens, OutputTokens: o.outputTokens, ExecutionCount: int(st.row.Execution), DurationMs: o.durationMs}, nil
}

func (s *Service) stepEvent(st *state, step Step, typ string, o outcome) events.New {
	role := st.def.Roles[step.RoleID]
	data := map[string]any{
		"step": step.Key, "stepName": step.Name, "stepType": step.Type, "executionCount": st.row.Execution,
		"roleId": nullable(step.RoleID), "roleName": nullable(role.Name), "roleColor": nullable(role.Color),
		"inputTokens": o.inputTokens, "outputTokens": o.outputTokens, "durationMs": o.durationMs,
	}
	if typ != EventStepStarted {
		data["passed"] = o.passed
		data["output"] = o.output
	}
	return events.New{Type: typ, Phase: step.Phase, Data: data}
}

func (s *Service) append(ctx context.Context, tx *db.Tx, st *state, news ...events.New) error {
	_, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(st.run), news...)
	return err
}

func failedOutcome(msg string) run.Outcome {
	return run.Outcome{Status: run.StatusFailed, FailureClass: string(llm.Terminal), TerminationReason: "routine_failed", Error: msg}
}

// finish ends the routine run: routine.completed or routine.failed, its task DONE (completed) or
// back to OPEN (otherwise, the failure recorded in routine.status_changed), then the run's end.
func (s *Service) finish(ctx context.Context, tx *db.Tx, st *state, o run.Outcome) error {
	r := st.run
	typ := EventCompleted
	if o.Status != run.StatusCompleted {
		typ = EventFailed
	}
	if err := s.save(ctx, tx, st); err != nil {
		return err
	}
	total := Metrics{}
	results, err := tx.Q.RoutineStepResultList(ctx, dbsqlc.RoutineStepResultListParams{TenantID: r.TenantID, RunID: r.ID})
	if err != nil {
		return err
	}
	total = metricsOf(results)
	data := map[string]any{"status": o.Status, "inputTokens": total.InputTokens, "outputTokens": total.OutputTokens, "executions": total.Executions}
	if o.Error != "" {
		data["error"] = o.Error
	}
	news := []events.New{{Type: typ, Data: data}}
	if r.TaskID.Valid {
		t, err := tx.Q.TaskGetForUpdate(ctx, dbsqlc.TaskGetForUpdateParams{TenantID: r.TenantID, ID: r.TaskID.UUID})
		if err != nil {
			return fmt.Errorf("load task of routine run %s: %w", r.ID, err)
		}
		to := taskOpen
		if o.Status == run.StatusCompleted && o.TerminationReason == agent.ReasonCompleted {
			to = taskDone
		}
		if t.Status != to {
			if _, err := tx.Q.TaskSetStatus(ctx, dbsqlc.TaskSetStatusParams{TenantID: r.TenantID, ID: t.ID, Status: to}); err != nil {
				return err
			}
			ev := map[string]any{"taskId": t.ID, "from": t.Status, "to": to}
			if o.Error != "" {
				ev["failure"] = o.Error
			}
			news = append(news, events.New{Type: EventStatusChanged, Data: ev})
		}
	}
	if err := s.append(ctx, tx, st, news...); err != nil {
		return err
	}
	// Step runs still going (a cancel) are cancelled with their routine.
	active, err := tx.Q.RoutineStepRunsActive(ctx, dbsqlc.RoutineStepRunsActiveParams{TenantID: r.TenantID, RoutineRunID: r.ID})
	if err != nil {
		return err
	}
	for _, a := range active {
		if err := s.runs.CancelTx(ctx, tx, a, "its routine run ended"); err != nil {
			return err
		}
	}
	_, err = s.runs.FinishTx(ctx, tx, run.Lease{Run: r, Attempt: r.Attempt}, o)
	return err
}

// Cancelled is the routine's part of cancelRun on a RUNNING run of kind ROUTINE (a run.OnCancel
// hook): a routine run ends CANCELLED at once, with its step runs; a step run is left to its
// worker.
func (s *Service) Cancelled(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	st, err := s.loadState(ctx, tx, r.TenantID, r.ID, true)
	if db.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.finish(ctx, tx, st, run.Outcome{Status: run.StatusCancelled, TerminationReason: run.ReasonUserCancel, Error: "cancelled by the user"})
}

// Enqueued is the routine's enqueue hook (run.OnEnqueue for kind ROUTINE): a routine run made
// workable again (resumeRun after a pause) gets the routine's own job, not the executor's; a
// step run is the executor's.
func (s *Service) Enqueued(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (bool, error) {
	if _, err := tx.Q.RoutineRunStateGet(ctx, dbsqlc.RoutineRunStateGetParams{TenantID: r.TenantID, RunID: r.ID}); db.IsNoRows(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	_, err := s.jobs.InsertTx(ctx, tx.Tx, StepArgs{TenantID: r.TenantID, RunID: r.ID}, nil)
	return true, err
}

// StepRunFinished wakes the routine run of a step run that ended (a run.OnFinish hook for kind
// ROUTINE, in the transaction that ends the step run).
func (s *Service) StepRunFinished(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
	link, err := tx.Q.RoutineStepRunByRun(ctx, dbsqlc.RoutineStepRunByRunParams{TenantID: fin.TenantID, StepRunID: fin.ID})
	if db.IsNoRows(err) {
		return nil // a routine run itself
	}
	if err != nil {
		return err
	}
	_, err = s.jobs.InsertTx(ctx, tx.Tx, StepArgs{TenantID: fin.TenantID, RunID: link.RoutineRunID}, nil)
	return err
}

// Hooks are what the runs of routine steps add to the executor: their limits and tools.
type Hooks struct{ s *Service }

// Hooks returns the executor hooks of kind ROUTINE.
func (s *Service) Hooks() Hooks { return Hooks{s} }

var _ agent.KindHooks = Hooks{}

// Limits of a step run: 30 model calls and 30 minutes, and its tools: its role's (every
// unrestricted one when the role names none) and, for a GATE or CRON step, its answer tool.
func (h Hooks) Limits(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (agent.Limits, error) {
	l := agent.Limits{MaxTurns: 30, MaxDuration: 30 * time.Minute}
	link, err := tx.Q.RoutineStepRunByRun(ctx, dbsqlc.RoutineStepRunByRunParams{TenantID: r.TenantID, StepRunID: r.ID})
	if db.IsNoRows(err) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	st, err := h.s.loadState(ctx, tx, r.TenantID, link.RoutineRunID, false)
	if err != nil {
		return l, err
	}
	step, _ := st.def.step(link.StepKey)
	role := st.def.Roles[step.RoleID]
	answer := ""
	switch step.Type {
	case StepGate:
		answer = GateVerdictTool
	case StepCron:
		answer = CronSignalTool
	}
	l.AllowTool = func(name string) bool {
		if name == GateVerdictTool || name == CronSignalTool {
			return name == answer
		}
		return role.AllTools || slices.Contains(role.Tools, name)
	}
	return l, nil
}

// Started does nothing: a step run's start is its routine's step.started.
func (Hooks) Started(context.Context, *db.Tx, dbsqlc.Run) error { return nil }

func passedWord(p bool) string {
	if p {
		return "passed"
	}
	return "failed"
}

func metadata(step Step) map[string]any {
	if m, ok := step.Config["metadata"].(map[string]any); ok {
		return m
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullable[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}
