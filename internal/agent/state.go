package agent

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
)

// state is what the loop reloads from Postgres before each step.
type state struct {
	run   dbsqlc.Run
	hist  []dbsqlc.Message
	calls []dbsqlc.ToolCall
	newer []dbsqlc.Message
}

// load reads the run, the conversation's context for it, its tool calls and newer user
// messages.
func (a *attempt) load(ctx context.Context) (state, error) {
	var st state
	var err error
	if a.first != nil {
		st, a.first = *a.first, nil // read with the lease (firstReads)
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

// readStateOf is readState of run r as read already: its three reads in one round trip.
func readStateOf(ctx context.Context, tx *db.Tx, r dbsqlc.Run) (state, error) {
	var b pgx.Batch
	st := queueState(ctx, &b, r.TenantID, r.ID)
	st.run = r
	err := tx.SendBatch(ctx, &b).Close()
	return *st, err
}

// queueState queues in b the reads of run runID's state (keyed by the run alone); the state
// but its run is whole once b's results are read.
func queueState(ctx context.Context, b *pgx.Batch, tenantID, runID uuid.UUID) *state {
	st := &state{}
	dbsqlc.QueueMany(b, func(q *dbsqlc.Queries) ([]dbsqlc.Message, error) {
		return q.MessageListContext(ctx, dbsqlc.MessageListContextParams{TenantID: tenantID, RunID: runID})
	}, &st.hist)
	dbsqlc.QueueMany(b, func(q *dbsqlc.Queries) ([]dbsqlc.ToolCall, error) {
		return q.ToolCallListByRun(ctx, dbsqlc.ToolCallListByRunParams{TenantID: tenantID, RunID: runID})
	}, &st.calls)
	dbsqlc.QueueMany(b, func(q *dbsqlc.Queries) ([]dbsqlc.Message, error) {
		return q.MessageListNewerUser(ctx, dbsqlc.MessageListNewerUserParams{TenantID: tenantID, RunID: runID})
	}, &st.newer)
	return st
}

// lastReply returns the blocks of the newest message of the conversation when it is a model
// reply of this run (nothing has followed it yet).
func (a *attempt) lastReply(hist []dbsqlc.Message) ([]llm.Block, bool) {
	if len(hist) == 0 {
		return nil, false
	}
	m := hist[len(hist)-1]
	if m.Role != "ASSISTANT" || !m.RunID.Valid || m.RunID.UUID != a.lease.Run.ID {
		return nil, false
	}
	var blocks []llm.Block
	if err := json.Unmarshal(m.Parts, &blocks); err != nil {
		return nil, false
	}
	return blocks, true
}

// llmCalls is the number of model replies this run has stored: the next call's index.
func (a *attempt) llmCalls(hist []dbsqlc.Message) int {
	n := 0
	for _, m := range hist {
		if m.RunID.Valid && m.RunID.UUID == a.lease.Run.ID && m.LlmCallIndex != nil {
			n = max(n, int(*m.LlmCallIndex)+1)
		}
	}
	return n
}

func pendingCalls(calls []dbsqlc.ToolCall) []dbsqlc.ToolCall {
	var out []dbsqlc.ToolCall
	for _, c := range calls {
		if c.Status == run.ToolCallPending || c.Status == run.ToolCallRunning {
			out = append(out, c)
		}
	}
	return out
}
