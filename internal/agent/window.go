package agent

import (
	"context"
	"errors"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
)

// request builds a model call for the REACT step: the system prompt (the agent's instructions
// and the user's preferences, then the context builder's mode, project and memories, then the
// conversation summary), the history fitted into the model's context by the window manager,
// and the tools (none during a reflection turn). force compacts to the minimum after the
// provider refused a request as too long. A window that summarised is persisted (summary,
// usage, context.window.applied) before the call; applied reports one.
func (a *attempt) request(ctx context.Context, model llm.Model, st state, reflecting, force bool) (req llm.Request, applied bool, err error) {
	req = a.baseRequest(model, st, reflecting)
	if a.e.window == nil {
		req.Messages = toLLM(st.hist)
	} else {
		extra, err := a.contextText(ctx, st)
		if err != nil {
			return req, false, err
		}
		if extra != "" {
			req.System += "\n\n" + extra
		}
		meter := &summaryMeter{a: a}
		in := a.windowInput(model, req, st, force)
		in.Meter = meter
		w, err := a.e.window.Apply(ctx, in)
		if err != nil {
			return req, false, err
		}
		if applied = w.Applied != nil; applied {
			var metered []contextwin.Metered
			err := a.e.runs.InFence(ctx, a.lease, func(ctx context.Context, tx *db.Tx) error {
				news, m, err := contextwin.Persist(ctx, tx, a.lease.Run, a.lease.Attempt, a.conv.ID, w.Applied)
				if err != nil {
					return err
				}
				if _, err = a.e.pub.Append(ctx, tx, a.lease.Scope(), news...); err != nil {
					return err
				}
				metered = m
				// Last in the transaction: settling locks the run's budget stripes.
				return meter.settleSummaries(ctx, tx, m)
			})
			if err != nil {
				metered = nil
			}
			meter.releaseSummaries(context.WithoutCancel(ctx), metered)
			if err != nil {
				return req, false, err
			}
			if !w.Applied.Fallback {
				a.conv.Summary, a.conv.SummarizedThrough.UUID, a.conv.SummarizedThrough.Valid = &w.Applied.Summary, w.Applied.Through, true
			}
		}
		req.System, req.Messages = w.System, toLLM(w.Messages)
	}
	if reflecting {
		req.System += "\n\n" + reflectInstruction
	}
	return req, applied, nil
}

// baseRequest is a call's request before the context builder's text and the history are
// added: the model, the agent's system prompt, the output cap and the tools (none during a
// reflection turn).
func (a *attempt) baseRequest(model llm.Model, st state, reflecting bool) llm.Request {
	req := llm.Request{Model: model.ID, System: a.systemPrompt(st.run), MaxTokens: a.maxTokens(st.run, model)}
	if a.conv.Agentic && a.e.tools != nil && !reflecting {
		req.Tools = a.tools().Specs()
	}
	return req
}

func (a *attempt) windowInput(model llm.Model, req llm.Request, st state, force bool) contextwin.Input {
	return contextwin.Input{
		Conversation: a.conv, Strategy: a.set.ContextStrategy, Model: model,
		System: req.System, Tools: req.Tools, History: st.hist, Force: force,
	}
}

// contextText is the context builder's part of the system prompt, built once per attempt: the
// conversation's mode, the project and the memories relevant to the message the run answers.
func (a *attempt) contextText(ctx context.Context, st state) (string, error) {
	if a.built != nil {
		return *a.built, nil
	}
	r := a.lease.Run
	var text string
	err := a.e.db.InTx(ctx, r.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var err error
		text, err = a.buildContext(ctx, tx, r, st)
		return err
	})
	if err != nil {
		return "", err
	}
	a.built = &text
	return text, nil
}

// buildContext runs the context builder for run r at state st inside tx (the first attempt of
// a chat turn does it in the transaction that acquires the run: firstReads).
func (a *attempt) buildContext(ctx context.Context, tx *db.Tx, r dbsqlc.Run, st state) (string, error) {
	query := ""
	for i := len(st.hist) - 1; i >= 0; i-- {
		if m := st.hist[i]; m.Role == "USER" {
			if query == "" {
				query = m.Content // the newest user message, unless the trigger is found
			}
			if st.run.TriggerMessageID.Valid && m.ID == st.run.TriggerMessageID.UUID {
				query = m.Content
				break
			}
		}
	}
	return contextwin.Build(ctx, tx, contextwin.BuildInput{
		TenantID: r.TenantID, UserID: r.UserID, ProjectID: a.conv.ProjectID, Mode: a.conv.Mode, Query: query,
	})
}

// contextTooLong reports a provider's refusal of a request as longer than the model's context,
// before any output: RECOVERABLE by compacting the context and calling again.
func contextTooLong(err error) bool {
	var le *llm.Error
	return errors.As(err, &le) && le.ContextLength && !le.Emitted
}
