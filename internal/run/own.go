package run

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/llm"
)

// Own describes a run that works in a conversation of its own (a task's run, a sub-agent, a
// routine step, a team phase): the conversation carries its model and system prompt, and its
// trigger message is Prompt, so the run sees only what it is given.
type Own struct {
	TenantID, UserID, ProjectID uuid.UUID
	// ConversationKind is TASK or ROUTINE (neither is listed among the user's chats).
	ConversationKind string
	Title            string
	Model            string
	SystemPrompt     string // "": none
	// GoesWithRun deletes the conversation with its run (conversations.owner_run_id: a
	// sub-agent's goes when its parent's conversation is deleted).
	GoesWithRun bool
	// Kind is the run's kind; TaskID, ParentRunID and Depth are its links (zero: none).
	Kind        string
	TaskID      uuid.NullUUID
	ParentRunID uuid.NullUUID
	Depth       int32
	MaxAttempts int32
	Prompt      string
	AuthorID    uuid.NullUUID // the trigger message's author (none: the system's)
	// Queued is added to the data of the run's task.queued event (its kind and message id).
	Queued map[string]any
}

// Owned is what CreateOwn made.
type Owned struct {
	Conversation dbsqlc.Conversation
	Run          dbsqlc.Run
	Message      dbsqlc.Message
}

// CreateOwn makes, in tx, the conversation of in, a QUEUED run of in.Kind in it, the run's
// trigger message (in.Prompt) and its task.queued event. It inserts no job: the caller enqueues
// the run (Enqueue), parks it or leaves it to a dispatcher.
func (s *Service) CreateOwn(ctx context.Context, tx *db.Tx, in Own) (Owned, error) {
	var out Owned
	title := in.Title
	runID, msgID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	conv, err := tx.Q.ConversationInsertOwn(ctx, dbsqlc.ConversationInsertOwnParams{
		TenantID: in.TenantID, ID: uuid.Must(uuid.NewV7()), ProjectID: in.ProjectID, UserID: in.UserID, Title: &title,
		Kind: in.ConversationKind, Model: in.Model, SystemPrompt: in.SystemPrompt,
		OwnerRunID: uuid.NullUUID{UUID: runID, Valid: in.GoesWithRun},
	})
	if err != nil {
		return out, fmt.Errorf("insert conversation of a %s run: %w", in.Kind, err)
	}
	pos, err := tx.Q.ConversationNextPositions(ctx, dbsqlc.ConversationNextPositionsParams{TenantID: in.TenantID, ID: conv.ID, N: 1, NewRun: true})
	if err != nil {
		return out, err
	}
	r, err := tx.Q.RunInsertOwn(ctx, dbsqlc.RunInsertOwnParams{
		TenantID: in.TenantID, ID: runID, UserID: in.UserID, Kind: in.Kind, TaskID: in.TaskID, ParentRunID: in.ParentRunID,
		Depth: in.Depth, ConversationID: uuid.NullUUID{UUID: conv.ID, Valid: true}, ConversationSeq: pos.RunCount,
		TriggerMessageID: uuid.NullUUID{UUID: msgID, Valid: true}, MaxAttempts: in.MaxAttempts,
	})
	if err != nil {
		return out, fmt.Errorf("insert %s run: %w", in.Kind, err)
	}
	parts, err := json.Marshal([]llm.Block{{Type: llm.BlockText, Text: in.Prompt}})
	if err != nil {
		return out, err
	}
	msg, err := tx.Q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
		TenantID: in.TenantID, ID: msgID, ConversationID: conv.ID, RunID: uuid.NullUUID{UUID: runID, Valid: true},
		RunSeq: pos.RunCount, Position: pos.MessageCount, Role: "USER", Content: in.Prompt, Parts: parts,
		TokenEstimate: int32((len(in.Prompt) + 3) / 4), AuthorID: in.AuthorID,
	})
	if err != nil {
		return out, fmt.Errorf("insert trigger message of run %s: %w", runID, err)
	}
	data := map[string]any{"kind": r.Kind, "messageId": msgID, "queuedBehind": nil}
	for k, v := range in.Queued {
		data[k] = v
	}
	if _, err := s.pub.Append(ctx, tx, ScopeOf(r), events.New{Type: events.TaskQueued, Data: data}); err != nil {
		return out, err
	}
	return Owned{Conversation: conv, Run: r, Message: msg}, nil
}
