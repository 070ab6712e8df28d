package team

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/agent"
	"github.com/agentry/agentry/internal/approval"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// PhaseFinished is the run.FinishHook of TEAM_PHASE runs. In the transaction that ends the
// phase's run it records the phase's end (status, turns, tokens, output; once: a finished
// phase is never finished or run again), releases what it held of the team budget, appends
// team.phase.completed to the team run and moves the team on: the next phase's run and job,
// or the team run's end.
func (s *Service) PhaseFinished(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
	ph, err := tx.Q.TeamPhaseByRunForUpdate(ctx, dbsqlc.TeamPhaseByRunForUpdateParams{TenantID: fin.TenantID, RunID: fin.ID})
	if err != nil {
		return fmt.Errorf("load phase of run %s: %w", fin.ID, err)
	}
	if ph.Status != run.StatusRunning {
		return nil
	}
	if err := settleTeam(ctx, tx, fin, 0); err != nil {
		return err
	}
	tr, err := tx.Q.TeamRunForUpdate(ctx, dbsqlc.TeamRunForUpdateParams{TenantID: fin.TenantID, ID: ph.TeamRunID})
	if err != nil {
		return fmt.Errorf("load team: %w", err)
	}
	var output *string
	if m, err := tx.Q.RunLastReply(ctx, dbsqlc.RunLastReplyParams{TenantID: fin.TenantID, RunID: fin.ID}); err == nil {
		output = &m.Content
	} else if !db.IsNoRows(err) {
		return err
	}
	ph, err = tx.Q.TeamPhaseFinish(ctx, dbsqlc.TeamPhaseFinishParams{
		TenantID: fin.TenantID, ID: ph.ID, Status: fin.Status, Turns: fin.Turns, InputTokens: fin.InputTokens,
		OutputTokens: fin.OutputTokens, Output: output, TerminationReason: fin.TerminationReason,
	})
	if err != nil {
		return fmt.Errorf("finish phase: %w", err)
	}
	teamRun, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: fin.TenantID, ID: tr.RunID})
	if err != nil {
		return fmt.Errorf("load team run: %w", err)
	}
	if run.IsTerminal(teamRun.Status) {
		// The team ended meanwhile (cancelled): its phase just stopped. Nothing follows the team
		// run's terminal event; the phase's end is on its row and its own run.
		return nil
	}
	dur := time.Duration(0)
	if ph.FinishedAt != nil {
		dur = ph.FinishedAt.Sub(ph.StartedAt)
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(teamRun), events.New{Type: EventPhaseCompleted, Phase: ph.Phase, Data: map[string]any{
		"phase": ph.Phase, "iteration": ph.Iteration, "attempt": ph.Attempt, "status": ph.Status, "model": ph.Model,
		"tokens": ph.InputTokens + ph.OutputTokens, "inputTokens": ph.InputTokens, "outputTokens": ph.OutputTokens,
		"turns": ph.Turns, "durationMs": dur.Milliseconds(), "phaseId": ph.ID, "phaseRunId": ph.RunID, "terminationReason": fin.TerminationReason,
	}}); err != nil {
		return err
	}
	return s.advance(ctx, tx, tr, teamRun, ph, fin)
}

// TeamConversation is the run.ConversationsHook of TEAM_PHASE runs: a phase's end may end the
// team run and hand on its conversation, so that conversation is locked before the phase's own
// and its run, in the order of an INTERRUPT message on it (the conversation, the phase in
// flight, the team run).
func (s *Service) TeamConversation(ctx context.Context, tx *db.Tx, phaseRun dbsqlc.Run) ([]uuid.UUID, error) {
	conv, err := tx.Q.TeamConversationByPhaseRun(ctx, dbsqlc.TeamConversationByPhaseRunParams{TenantID: phaseRun.TenantID, RunID: phaseRun.ID})
	if db.IsNoRows(err) || err == nil && !conv.Valid {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("team conversation of phase run %s: %w", phaseRun.ID, err)
	}
	return []uuid.UUID{conv.UUID}, nil
}

// LockPhases is the run.WorkersHook of TEAM runs: it locks the runs of team run teamRun's
// phases in flight, before a control of the team run (cancel, stop, pause, resume) locks the
// team run itself. A phase's end locks its own run first and the team run after it, so both
// take the two in one order. A phase that ends while its run is being waited for starts the next
// one, which is locked in turn; none can start once the phase in flight is locked.
func (s *Service) LockPhases(ctx context.Context, tx *db.Tx, teamRun dbsqlc.Run) ([]dbsqlc.Run, error) {
	tr, err := tx.Q.TeamRunByRun(ctx, dbsqlc.TeamRunByRunParams{TenantID: teamRun.TenantID, RunID: teamRun.ID})
	if db.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load team of run %s: %w", teamRun.ID, err)
	}
	locked := map[uuid.UUID]bool{}
	var out []dbsqlc.Run
	for {
		phases, err := tx.Q.TeamPhaseList(ctx, dbsqlc.TeamPhaseListParams{TenantID: tr.TenantID, TeamRunID: tr.ID})
		if err != nil {
			return nil, err
		}
		more := false
		for _, ph := range phases {
			if ph.Status != run.StatusRunning || locked[ph.RunID] {
				continue
			}
			r, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: tr.TenantID, ID: ph.RunID})
			if err != nil {
				return nil, fmt.Errorf("lock phase run %s: %w", ph.RunID, err)
			}
			locked[ph.RunID], more = true, true
			out = append(out, r)
		}
		if !more {
			return out, nil
		}
	}
}

// advance moves the team on after phase ph (its run fin) ended.
func (s *Service) advance(ctx context.Context, tx *db.Tx, tr dbsqlc.TeamRun, teamRun dbsqlc.Run, ph dbsqlc.TeamPhase, fin dbsqlc.Run) error {
	reason := ""
	if fin.TerminationReason != nil {
		reason = *fin.TerminationReason
	}
	iteration := int(ph.Iteration)
	if teamRun.StopRequested && fin.Status == run.StatusCompleted {
		// stopRun on the team run: its phase finished its step; the team ends with what it has
		// (the plan, the workspace changes, this phase's last reply). A phase that failed fails
		// the team as below.
		summary := "stopped by the user after the " + phaseName(ph.Phase) + " phase"
		if ph.Output != nil {
			summary += ": " + *ph.Output
		}
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusCompleted, ReasonStopped, summary, nil)
	}
	switch {
	case reason == agent.ReasonBudget:
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusFailed, ReasonBudget, "the token budget was used up in the "+phaseName(ph.Phase)+" phase", nil)
	case fin.Status == run.StatusTimedOut || reason == agent.ReasonMaxDuration || !time.Now().Before(tr.Deadline):
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusFailed, ReasonTimeout, "the team's time ran out in the "+phaseName(ph.Phase)+" phase", nil)
	case fin.Status == run.StatusCancelled:
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusCancelled, ReasonCancelled, "the "+phaseName(ph.Phase)+" phase was cancelled", nil)
	case fin.Status == run.StatusFailed:
		msg := "the " + phaseName(ph.Phase) + " phase failed"
		if fin.Error != nil {
			msg += ": " + *fin.Error
		}
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusFailed, ReasonPhaseFailed, msg, nil)
	}
	switch ph.Phase {
	case PhaseArchitect:
		if err := tx.Q.TeamRunSetPlan(ctx, dbsqlc.TeamRunSetPlanParams{TenantID: tr.TenantID, ID: tr.ID, Plan: ph.Output}); err != nil {
			return err
		}
		tr.Plan = ph.Output
		return s.startPhase(ctx, tx, tr, teamRun, PhaseExecutor, iteration, 1, executorPrompt(tr, iteration, nil))
	case PhaseExecutor:
		return s.startReview(ctx, tx, tr, teamRun, iteration, 1)
	}
	v := VerdictOf(ph)
	if v == nil {
		if ph.Attempt < 2 {
			return s.startReview(ctx, tx, tr, teamRun, iteration, 2) // asked once more
		}
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusFailed, ReasonNoVerdict, "the reviewer ended twice without a valid verdict", nil)
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(teamRun), events.New{Type: EventReviewDecision, Phase: PhaseReviewer, Data: map[string]any{
		"verdict": v.Verdict, "summary": truncate(v.Summary, 2000), "issueCount": len(v.Issues), "iteration": iteration, "phaseId": ph.ID,
	}}); err != nil {
		return err
	}
	switch v.Verdict {
	case VerdictApprove:
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusCompleted, ReasonApproved, v.Summary, nil)
	case VerdictBlock:
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusFailed, ReasonBlocked, v.Summary, v)
	}
	if iteration >= int(tr.MaxIterations) {
		return s.finishTeam(ctx, tx, tr, teamRun, run.StatusFailed, ReasonMaxIterations,
			fmt.Sprintf("the reviewer still requested changes after %d iterations", iteration), nil)
	}
	return s.startPhase(ctx, tx, tr, teamRun, PhaseExecutor, iteration+1, 1, executorPrompt(tr, iteration+1, v))
}

// startReview starts the reviewer of an iteration with the diff of the team run's changes.
func (s *Service) startReview(ctx context.Context, tx *db.Tx, tr dbsqlc.TeamRun, teamRun dbsqlc.Run, iteration, attempt int) error {
	diff := ""
	if s.workspace != nil {
		var err error
		if diff, err = s.workspace.RunDiff(ctx, tx, tr.TenantID, tr.RunID); err != nil {
			return fmt.Errorf("diff of the team's changes: %w", err)
		}
	}
	return s.startPhase(ctx, tx, tr, teamRun, PhaseReviewer, iteration, attempt, reviewerPrompt(tr, diff, attempt > 1))
}

// finishTeam ends the team run: team.run.completed or team.run.failed (reason, summary), and
// for a block the team_blocked question; then the run's end (its finish hook asks the rollback
// question of a failed run that changed files, except after a block: then it comes when the user
// chooses to stop).
func (s *Service) finishTeam(ctx context.Context, tx *db.Tx, tr dbsqlc.TeamRun, teamRun dbsqlc.Run, status run.Status, reason, summary string, block *Verdict) error {
	if teamRun.ConversationID.Valid {
		if _, err := tx.Q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: tr.TenantID, ID: teamRun.ConversationID.UUID}); err != nil {
			return fmt.Errorf("lock conversation: %w", err)
		}
	}
	typ := EventRunFailed
	if status == run.StatusCompleted {
		typ = EventRunCompleted
	}
	cur, err := tx.Q.TeamRunGet(ctx, dbsqlc.TeamRunGetParams{TenantID: tr.TenantID, ID: tr.ID})
	if err != nil {
		return err
	}
	if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(teamRun), events.New{Type: typ, Data: map[string]any{
		"status": status, "reason": reason, "summary": truncate(summary, 2000), "tokensUsed": cur.TokensUsed, "tokenBudget": cur.TokenBudget,
	}}); err != nil {
		return err
	}
	if block != nil && s.approvals != nil {
		if _, err := s.approvals.RequestForEnded(ctx, tx, teamRun, approval.KindTeamBlocked,
			"The reviewer blocked the team run: "+truncate(block.Summary, 2000)+" Continue with one more iteration (approve) or stop (reject)?",
			map[string]any{"teamRunId": tr.ID, "summary": truncate(block.Summary, 2000), "issues": block.Issues}); err != nil {
			return err
		}
	}
	o := run.Outcome{Status: status, TerminationReason: reason}
	if status == run.StatusFailed {
		o.FailureClass, o.Error = string(llm.Terminal), summary
	}
	if status == run.StatusCancelled {
		o.Error = summary
	}
	_, err = s.runs.FinishTx(ctx, tx, run.Lease{Run: teamRun, Attempt: teamRun.Attempt}, o)
	return err
}

// Finished is the run.FinishHook of TEAM runs: a phase still in flight is cancelled (the team
// run was cancelled), and the workspace question of an ended run is asked (a
// completed team commits its snapshot; a failed one asks roll back, keep or continue), except
// after a block, whose team_blocked question comes first.
func (s *Service) Finished(ctx context.Context, tx *db.Tx, fin dbsqlc.Run) error {
	tr, err := tx.Q.TeamRunByRun(ctx, dbsqlc.TeamRunByRunParams{TenantID: fin.TenantID, RunID: fin.ID})
	if err != nil {
		return fmt.Errorf("load team of run %s: %w", fin.ID, err)
	}
	phases, err := tx.Q.TeamPhaseList(ctx, dbsqlc.TeamPhaseListParams{TenantID: fin.TenantID, TeamRunID: tr.ID})
	if err != nil {
		return err
	}
	cancelled := false
	for _, ph := range phases {
		if ph.Status != run.StatusRunning {
			continue
		}
		pr, err := tx.Q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: fin.TenantID, ID: ph.RunID})
		if err != nil {
			return err
		}
		if run.IsTerminal(pr.Status) {
			continue
		}
		if err := s.runs.CancelTx(ctx, tx, pr, "the team run ended"); err != nil {
			return err
		}
		cancelled = true
	}
	if fin.Status == run.StatusCancelled && (fin.TerminationReason == nil || *fin.TerminationReason != ReasonCancelled) {
		// Cancelled through cancelRun: finishTeam did not run.
		if _, err := s.runs.Publisher().Append(ctx, tx, run.ScopeOf(fin), events.New{Type: EventRunFailed, Data: map[string]any{
			"status": fin.Status, "reason": ReasonCancelled, "summary": "cancelled by the user", "phaseCancelled": cancelled,
			"tokensUsed": tr.TokensUsed, "tokenBudget": tr.TokenBudget,
		}}); err != nil {
			return err
		}
	}
	if fin.TerminationReason != nil && *fin.TerminationReason == ReasonBlocked {
		return nil
	}
	if s.workspace == nil {
		return nil
	}
	return s.workspace.Finished(ctx, tx, fin)
}

// Decided applies a decision on a team_blocked question (approval.DecisionHook): APPROVE
// re-opens the team run for one more iteration (run.Service.Reopen, which calls Continue);
// REJECT stops it for good, and asks the rollback question when it changed files.
func (s *Service) Decided(ctx context.Context, tx *db.Tx, ap dbsqlc.Approval) error {
	if ap.Status == approval.StatusApproved {
		_, err := s.runs.Reopen(ctx, tx, ap.TenantID, ap.RunID, events.New{Type: events.ExecutionResumed, Data: map[string]any{
			"reason": "team_blocked: continue with one more iteration", "approvalId": ap.ID,
		}})
		return err
	}
	r, err := tx.Q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: ap.TenantID, ID: ap.RunID})
	if err != nil {
		return err
	}
	if s.workspace == nil {
		return nil
	}
	// The snapshot is decided now (Finished skipped it for the block).
	return s.workspace.Finished(ctx, tx, r)
}

// Expired is the approval.ExpiryHook of team_blocked questions: no answer is a stop. The team
// run stays FAILED, and the rollback question is asked now when it changed files.
func (s *Service) Expired(ctx context.Context, tx *db.Tx, _ dbsqlc.Approval, r dbsqlc.Run) ([]events.New, error) {
	if s.workspace == nil {
		return nil, nil
	}
	return nil, s.workspace.Finished(ctx, tx, r)
}

// Continue is the run.EnqueueHook of TEAM runs: a team run made workable again (a team_blocked
// question approved, or CONTINUE on its rollback question) is RUNNING again with one more
// iteration and a new deadline, and goes on where it stopped: the next iteration's executor
// with the last review's issues (or the reviewer again, or the architect when there is no plan).
func (s *Service) Continue(ctx context.Context, tx *db.Tx, r dbsqlc.Run) error {
	tr, err := tx.Q.TeamRunByRun(ctx, dbsqlc.TeamRunByRunParams{TenantID: r.TenantID, RunID: r.ID})
	if err != nil {
		return fmt.Errorf("load team of run %s: %w", r.ID, err)
	}
	if r.ConversationID.Valid {
		if err := tx.Q.ConversationSetActiveRun(ctx, dbsqlc.ConversationSetActiveRunParams{TenantID: r.TenantID, ID: r.ConversationID.UUID, RunID: uuid.NullUUID{UUID: r.ID, Valid: true}}); err != nil {
			return err
		}
	}
	tr, err = tx.Q.TeamRunContinue(ctx, dbsqlc.TeamRunContinueParams{TenantID: tr.TenantID, ID: tr.ID, Deadline: time.Now().Add(s.minutes(int(tr.TimeoutSeconds / 60))).UTC()})
	if err != nil {
		return err
	}
	teamRun, err := tx.Q.TeamRunStart(ctx, dbsqlc.TeamRunStartParams{TenantID: r.TenantID, ID: r.ID})
	if err != nil {
		return fmt.Errorf("restart team run: %w", err)
	}
	phases, err := tx.Q.TeamPhaseList(ctx, dbsqlc.TeamPhaseListParams{TenantID: r.TenantID, TeamRunID: tr.ID})
	if err != nil {
		return err
	}
	if tr.Plan == nil || len(phases) == 0 {
		return s.startPhase(ctx, tx, tr, teamRun, PhaseArchitect, 1, 1, architectPrompt(tr))
	}
	last := phases[len(phases)-1]
	it := int(last.Iteration)
	if last.Phase == PhaseReviewer {
		v := VerdictOf(last)
		if v != nil && (v.Verdict == VerdictRequestChanges || v.Verdict == VerdictBlock) {
			return s.startPhase(ctx, tx, tr, teamRun, PhaseExecutor, it+1, 1, executorPrompt(tr, it+1, v))
		}
		if v == nil {
			return s.startReview(ctx, tx, tr, teamRun, it, 1)
		}
	}
	if last.Phase == PhaseExecutor && last.Status == run.StatusCompleted {
		return s.startReview(ctx, tx, tr, teamRun, it, 1)
	}
	if last.Phase == PhaseArchitect {
		return s.startPhase(ctx, tx, tr, teamRun, PhaseExecutor, 1, 1, executorPrompt(tr, 1, nil))
	}
	// An executor that did not complete: the next iteration's executor, with the last issues.
	var prev *Verdict
	for i := len(phases) - 1; i >= 0 && prev == nil; i-- {
		prev = VerdictOf(phases[i])
	}
	return s.startPhase(ctx, tx, tr, teamRun, PhaseExecutor, it+1, 1, executorPrompt(tr, it+1, prev))
}
