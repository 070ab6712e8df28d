// Package chat holds conversations and their messages, and the send-message path: the user's
// message, its run and the run's job are written in one transaction.
package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/events"
	"github.com/agentry/agentry/internal/extract"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/run"
	"github.com/agentry/agentry/internal/settings"
)

// Modes of a conversation.
var Modes = []string{"DEFAULT", "BRAINSTORM", "OUTPUT_REFINE", "BROWSER", "GAME"}

// Busy policies of sendMessage.
const (
	BusyEnqueue   = "ENQUEUE"
	BusyReject    = "REJECT"
	BusyInterrupt = "INTERRUPT"
)

// MaxMessageBytes caps a user message.
const MaxMessageBytes = 200_000

// Models resolves model references ("provider:model") and knows the default.
type Models interface {
	Resolve(ref string) (llm.Provider, llm.Model, error)
	Default() string
}

// Service is the chat domain.
type Service struct {
	db     *db.DB
	runs   *run.Service
	models Models
	log    *slog.Logger
	admit  Admission
	// extract reads attachments (its zero value: a child of this executable, default limits).
	extract extract.Sandbox
}

// Admission refuses a new run that no budget can pay for (usage.Service implements it).
type Admission interface {
	// QueueAdmit queues the admission's reads in b; once b's results are read, the function it
	// returns is BUDGET_EXCEEDED while a budget applying to the user has nothing left.
	QueueAdmit(b *pgx.Batch, tenantID, userID uuid.UUID) func() error
}

// Option configures the Service at construction (NewService).
type Option func(*Service)

// WithAdmission connects budget admission (without: every run is admitted).
func WithAdmission(a Admission) Option { return func(s *Service) { s.admit = a } }

// NewService returns the chat service.
func NewService(d *db.DB, runs *run.Service, models Models, log *slog.Logger, options ...Option) *Service {
	s := &Service{db: d, runs: runs, models: models, log: log}
	for _, o := range options {
		o(s)
	}
	return s
}

// CreateDefaultProject makes a tenant's default project (inside the sign-up transaction).
func CreateDefaultProject(ctx context.Context, tx *db.Tx, tenantID, _ uuid.UUID) error {
	_, err := tx.Q.ProjectInsert(ctx, dbsqlc.ProjectInsertParams{TenantID: tenantID, ID: uuid.Must(uuid.NewV7()), Name: "Default", IsDefault: true})
	if err != nil {
		return fmt.Errorf("create default project: %w", err)
	}
	return nil
}

// NewConversation is the input of CreateConversation; zero fields take the defaults.
type NewConversation struct {
	ProjectID    uuid.UUID
	Title        string
	Mode         string
	Model        string
	SystemPrompt string
	Agentic      *bool
}

// CreateConversation starts a conversation in a project (the default one when none is named).
// MEMBER or higher.
func (s *Service) CreateConversation(ctx context.Context, in NewConversation) (dbsqlc.Conversation, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return dbsqlc.Conversation{}, err
	}
	if utf8.RuneCountInString(in.Title) > 500 {
		return dbsqlc.Conversation{}, apperr.Invalid("title", "must be at most 500 characters")
	}
	if len(in.SystemPrompt) > 100_000 {
		return dbsqlc.Conversation{}, apperr.Invalid("systemPrompt", "must be at most 100000 bytes")
	}
	mode := in.Mode
	if mode == "" {
		mode = "DEFAULT"
	}
	model := strings.TrimSpace(in.Model)
	if model == "" {
		model = s.models.Default()
	}
	if _, _, err := s.models.Resolve(model); err != nil {
		return dbsqlc.Conversation{}, apperr.Invalid("model", "%v", err)
	}
	agentic := true
	if in.Agentic != nil {
		agentic = *in.Agentic
	}
	var out dbsqlc.Conversation
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		var project dbsqlc.Project
		if in.ProjectID == uuid.Nil {
			project, err = tx.Q.ProjectGetDefault(ctx, a.TenantID)
		} else {
			project, err = tx.Q.ProjectGet(ctx, dbsqlc.ProjectGetParams{TenantID: a.TenantID, ID: in.ProjectID})
		}
		if db.IsNoRows(err) {
			return apperr.NotFoundf("project")
		}
		if err != nil {
			return err
		}
		var title *string
		if t := strings.TrimSpace(in.Title); t != "" {
			title = &t
		}
		out, err = tx.Q.ConversationInsert(ctx, dbsqlc.ConversationInsertParams{
			TenantID: a.TenantID, ID: uuid.Must(uuid.NewV7()), ProjectID: project.ID, UserID: a.UserID,
			Title: title, Mode: mode, Model: model, SystemPrompt: in.SystemPrompt, Agentic: agentic,
		})
		return err
	})
	return out, err
}

// Conversation returns one of the tenant's conversations; any other is NOT_FOUND.
func (s *Service) Conversation(ctx context.Context, id uuid.UUID) (dbsqlc.Conversation, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return dbsqlc.Conversation{}, err
	}
	var out dbsqlc.Conversation
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ConversationGet(ctx, dbsqlc.ConversationGetParams{TenantID: a.TenantID, ID: id})
		return err
	})
	if db.IsNoRows(err) {
		return out, apperr.NotFoundf("conversation")
	}
	return out, err
}

// Conversations lists the caller's conversations, newest first, after the cursor id.
func (s *Service) Conversations(ctx context.Context, after uuid.UUID, limit int) ([]dbsqlc.Conversation, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Conversation
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.ConversationList(ctx, dbsqlc.ConversationListParams{TenantID: a.TenantID, UserID: a.UserID, After: after, Lim: int32(limit)})
		return err
	})
	return out, err
}

// Messages pages a conversation's messages in display order after a position.
func (s *Service) Messages(ctx context.Context, conversationID uuid.UUID, afterPosition int64, limit int) ([]dbsqlc.Message, error) {
	a, err := auth.Require(ctx, auth.RoleViewer)
	if err != nil {
		return nil, err
	}
	var out []dbsqlc.Message
	err = s.db.InTx(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		out, err = tx.Q.MessageListPage(ctx, dbsqlc.MessageListPageParams{TenantID: a.TenantID, ConversationID: conversationID, AfterPosition: afterPosition, Lim: int32(limit)})
		return err
	})
	return out, err
}

// Send is the input of SendMessage.
type Send struct {
	ConversationID uuid.UUID
	Content        string
	IdempotencyKey string
	IfBusy         string
	// Attachments are files sent with the message (see attachmentBlocks for what is accepted).
	Attachments []Attachment
}

// Sent is what SendMessage made (or found, for a repeated idempotency key).
type Sent struct {
	Message dbsqlc.Message
	Run     dbsqlc.Run
}

// SendMessage stores the user's message and a CHAT_TURN run for it, in one transaction with
// the run's task.queued event and, when the conversation is idle, the run's job (or, when this
// process works it itself, the run's acquisition: it starts once the transaction commits). A busy
// conversation queues the run (ENQUEUE, the default), refuses (REJECT: CONFLICT) or cancels the
// active run first (INTERRUPT). The same idempotency key returns the same message and run; with
// other content it is CONFLICT.
func (s *Service) SendMessage(ctx context.Context, in Send) (Sent, error) {
	a, err := auth.Require(ctx, auth.RoleMember)
	if err != nil {
		return Sent{}, err
	}
	if err := in.check(); err != nil {
		return Sent{}, err
	}
	attached, images, err := attachmentBlocks(ctx, s.extract, in.Attachments)
	if err != nil {
		return Sent{}, err
	}
	var out Sent
	err = s.db.InTxRetry(ctx, a.TenantID, func(ctx context.Context, tx *db.Tx) error {
		o, err := s.open(ctx, tx, a, in)
		if err != nil {
			return err
		}
		if o.sent {
			out, err = sentBefore(ctx, tx, o.prev, in)
			return err
		}
		if images {
			if _, m, err := s.models.Resolve(o.conv.Model); err == nil && !m.Vision {
				return apperr.Invalid("attachments", "the conversation's model %s does not accept images; send text files or PDFs, or use a model with vision", o.conv.Model)
			}
		}
		busy, err := s.makeWay(ctx, tx, a, o.conv, in.IfBusy)
		if err != nil {
			return err
		}
		if err := o.admitted(); err != nil {
			return err
		}
		out, err = s.insertSent(ctx, tx, a, o, in, busy, attached)
		return err
	})
	return out, err
}

// opened is what SendMessage reads before it writes.
type opened struct {
	conv dbsqlc.Conversation
	set  settings.Settings
	// prev is the run an earlier SendMessage with the same idempotency key made (sent).
	prev dbsqlc.Run
	sent bool
	// admitted is the budgets' verdict on a new run.
	admitted func() error
}

// open locks the conversation and reads the user's settings, the run an idempotency key made
// and the budgets' admission, in one round trip: none of the reads depends on another.
func (s *Service) open(ctx context.Context, tx *db.Tx, a auth.Actor, in Send) (opened, error) {
	var (
		b     pgx.Batch
		o     = opened{admitted: func() error { return nil }}
		set   dbsqlc.AgentSetting
		found bool
	)
	dbsqlc.QueueOne(&b, func(q *dbsqlc.Queries) (dbsqlc.Conversation, error) {
		return q.ConversationGetForUpdate(ctx, dbsqlc.ConversationGetForUpdateParams{TenantID: a.TenantID, ID: in.ConversationID})
	}, &o.conv)
	dbsqlc.QueueMaybe(&b, func(q *dbsqlc.Queries) (dbsqlc.AgentSetting, error) {
		return q.AgentSettingsGet(ctx, dbsqlc.AgentSettingsGetParams{TenantID: a.TenantID, UserID: a.UserID})
	}, &set, &found)
	if in.IdempotencyKey != "" {
		dbsqlc.QueueMaybe(&b, func(q *dbsqlc.Queries) (dbsqlc.Run, error) {
			return q.RunGetByIdempotencyKey(ctx, dbsqlc.RunGetByIdempotencyKeyParams{TenantID: a.TenantID,
				ConversationID: uuid.NullUUID{UUID: in.ConversationID, Valid: true}, IdempotencyKey: &in.IdempotencyKey})
		}, &o.prev, &o.sent)
	}
	if s.admit != nil {
		o.admitted = s.admit.QueueAdmit(&b, a.TenantID, a.UserID)
	}
	err := tx.SendBatch(ctx, &b).Close()
	if db.IsNoRows(err) {
		return o, apperr.NotFoundf("conversation")
	}
	if err != nil {
		return o, fmt.Errorf("open conversation: %w", err)
	}
	o.set = settings.Of(set, found)
	return o, nil
}

// check refuses a message SendMessage cannot take: empty, too long, not UTF-8, or with an
// idempotency key that is too long.
func (in Send) check() error {
	switch {
	case strings.TrimSpace(in.Content) == "":
		return apperr.Invalid("content", "must not be empty")
	case len(in.Content) > MaxMessageBytes:
		return apperr.Invalid("content", "must be at most %d bytes", MaxMessageBytes)
	case !utf8.ValidString(in.Content):
		return apperr.Invalid("content", "must be valid UTF-8")
	case len(in.IdempotencyKey) > 200:
		return apperr.Invalid("idempotencyKey", "must be at most 200 characters")
	}
	return nil
}

// sentBefore returns the message and run prev, which an earlier SendMessage with the same
// idempotency key made; the key used for other content is CONFLICT.
func sentBefore(ctx context.Context, tx *db.Tx, prev dbsqlc.Run, in Send) (Sent, error) {
	msg, err := tx.Q.MessageGet(ctx, dbsqlc.MessageGetParams{TenantID: prev.TenantID, ID: prev.TriggerMessageID.UUID})
	if err == nil && msg.Content != in.Content {
		return Sent{}, apperr.New(apperr.Conflict, "idempotencyKey was already used for another message in this conversation: use a new key for new content").With("runId", prev.ID)
	}
	return Sent{Message: msg, Run: prev}, err
}

// makeWay applies the busy policy (ENQUEUE when empty) to conv's active run and reports whether
// the new run must queue behind one: REJECT refuses (CONFLICT); INTERRUPT ends the runs before
// the new message, under the conversation's lock, and a RUNNING one's worker records its end
// while the new run waits.
func (s *Service) makeWay(ctx context.Context, tx *db.Tx, a auth.Actor, conv dbsqlc.Conversation, policy string) (bool, error) {
	if !conv.ActiveRunID.Valid {
		return false, nil
	}
	switch policy {
	case BusyReject:
		return true, apperr.New(apperr.Conflict, "a run is already active in this conversation").With("activeRunId", conv.ActiveRunID.UUID.String())
	case BusyInterrupt:
		return s.runs.Interrupt(ctx, tx, a, conv, "interrupted by a new message")
	}
	return true, nil
}

// insertSent stores the run (with its task.queued event and, unless busy, its job or this
// process's acquisition of it: run.Service.Place) and the user's message in the opened
// conversation, at its next positions.
func (s *Service) insertSent(ctx context.Context, tx *db.Tx, a auth.Actor, o opened, in Send, busy bool, attached []llm.Block) (Sent, error) {
	conv := o.conv
	runID, msgID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	maxAttempts := int32(o.set.MaxRetries + 1)
	// Where the run is worked is decided before it is inserted, so the run row names its job
	// from the start; a run this process claims is acquired after the insert, in its batch.
	var place run.Place
	if !busy {
		var err error
		if place, err = s.runs.Place(ctx, tx, a.TenantID, runID, run.KindChatTurn, maxAttempts); err != nil {
			return Sent{}, err
		}
	}
	var key *string
	if in.IdempotencyKey != "" {
		key = &in.IdempotencyKey
	}
	// task.queued is stored by the statement that inserts the run.
	scope := events.Scope{TenantID: a.TenantID, RunID: runID, ConversationID: conv.ID}
	queued, err := events.Encode(scope, time.Now(), events.New{Type: events.TaskQueued, Data: map[string]any{
		"kind": run.KindChatTurn, "messageId": msgID, "queuedBehind": nullableRun(busy, conv.ActiveRunID),
	}})
	if err != nil {
		return Sent{}, err
	}
	blocks := append([]llm.Block{{Type: llm.BlockText, Text: in.Content}}, attached...)
	parts, _ := json.Marshal(blocks)
	// The positions, the run and the message go in one round trip. The conversation has been
	// locked since open read it, and nothing since moved its counts (an INTERRUPT ends runs, it
	// stores no message), so the positions the update reserves are known: the reserved ones are
	// checked against them. A run that starts now becomes the conversation's active one. The
	// user's scope admitted the conversation when open locked it; these writes in it are the
	// server's and go tenant-wide.
	seq, position := conv.RunCount+1, conv.MessageCount+1
	var (
		b   pgx.Batch
		pos dbsqlc.ConversationNextPositionsRow
		r   dbsqlc.RunInsertWithEventsRow
		out Sent
	)
	tx.QueueTenantWide(ctx, &b, "sendMessage: the run and the message in the conversation locked as the user", func(b *pgx.Batch) {
		dbsqlc.QueueOne(b, func(q *dbsqlc.Queries) (dbsqlc.ConversationNextPositionsRow, error) {
			return q.ConversationNextPositions(ctx, dbsqlc.ConversationNextPositionsParams{TenantID: a.TenantID, ID: conv.ID, N: 1, NewRun: true,
				ActiveRunID: uuid.NullUUID{UUID: runID, Valid: !busy}})
		}, &pos)
		dbsqlc.QueueOne(b, func(q *dbsqlc.Queries) (dbsqlc.RunInsertWithEventsRow, error) {
			return q.RunInsertWithEvents(ctx, dbsqlc.RunInsertWithEventsParams{
				TenantID: a.TenantID, ID: runID, UserID: a.UserID, Kind: run.KindChatTurn, Status: string(run.StatusQueued),
				ConversationID: uuid.NullUUID{UUID: conv.ID, Valid: true}, ConversationSeq: seq,
				TriggerMessageID: uuid.NullUUID{UUID: msgID, Valid: true}, IdempotencyKey: key, MaxAttempts: maxAttempts, JobID: place.JobID,
				Types: queued.Types, Phases: queued.Phases, Datas: queued.Datas, CreatedAt: queued.CreatedAt,
			})
		}, &r)
		dbsqlc.QueueOne(b, func(q *dbsqlc.Queries) (dbsqlc.Message, error) {
			return q.MessageInsert(ctx, dbsqlc.MessageInsertParams{
				TenantID: a.TenantID, ID: msgID, ConversationID: conv.ID, RunID: uuid.NullUUID{UUID: runID, Valid: true},
				RunSeq: seq, Position: position, Role: "USER", Content: in.Content, Parts: parts,
				TokenEstimate: int32(EstimateTokens(in.Content) + attachmentTokens(attached)),
				AuthorID:      uuid.NullUUID{UUID: a.UserID, Valid: true},
			})
		}, &out.Message)
	})
	if place.Claim != nil {
		place.Claim.Queue(ctx, tx, &b)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return Sent{}, fmt.Errorf("insert run and message: %w", err)
	}
	if pos.RunCount != seq || pos.MessageCount != position {
		return Sent{}, fmt.Errorf("conversation %s: positions %d/%d reserved, %d/%d expected", conv.ID, pos.RunCount, pos.MessageCount, seq, position)
	}
	out.Run = dbsqlc.Run(r)
	s.runs.Publisher().Stored(ctx, tx, queued, r.LastSeq)
	if place.Claim != nil {
		// Acquired with its message: the run is RUNNING when this commits.
		if out.Run, err = place.Claim.Acquired(ctx, tx); err != nil {
			return Sent{}, err
		}
	}
	return out, nil
}

func nullableRun(busy bool, id uuid.NullUUID) any {
	if !busy || !id.Valid {
		return nil
	}
	return id.UUID
}

// EstimateTokens is the rough token count of text (about 4 characters per token).
func EstimateTokens(text string) int { return (len(text) + 3) / 4 }
