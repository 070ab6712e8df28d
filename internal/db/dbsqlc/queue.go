package dbsqlc

// Not generated: sqlc's queries queued in a pgx.Batch, so that reads which do not depend on each
// other go to Postgres in one round trip (tx.SendBatch). Each result lands in out when the
// batch's results are read (BatchResults.Close); a :one query that finds no row leaves
// pgx.ErrNoRows as the batch's error (unless it reports found). The columns are read by
// position, in the order sqlc writes them for the struct.

import (
	"errors"

	"github.com/jackc/pgx/v5"
)

// QueueAgentSettingsGet queues AgentSettingsGet; found says whether the user has a row.
func QueueAgentSettingsGet(b *pgx.Batch, arg AgentSettingsGetParams, out *AgentSetting, found *bool) {
	b.Queue(agentSettingsGet, arg.TenantID, arg.UserID).Query(func(rows pgx.Rows) error {
		err := one(out)(rows)
		*found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// QueueConversationGet queues ConversationGet.
func QueueConversationGet(b *pgx.Batch, arg ConversationGetParams, out *Conversation) {
	b.Queue(conversationGet, arg.TenantID, arg.ID).Query(one(out))
}

// QueueMessageListContext queues MessageListContext.
func QueueMessageListContext(b *pgx.Batch, arg MessageListContextParams, out *[]Message) {
	b.Queue(messageListContext, arg.TenantID, arg.RunID).Query(many(out))
}

// QueueMessageListNewerUser queues MessageListNewerUser.
func QueueMessageListNewerUser(b *pgx.Batch, arg MessageListNewerUserParams, out *[]Message) {
	b.Queue(messageListNewerUser, arg.TenantID, arg.RunID).Query(many(out))
}

// QueueToolCallListByRun queues ToolCallListByRun.
func QueueToolCallListByRun(b *pgx.Batch, arg ToolCallListByRunParams, out *[]ToolCall) {
	b.Queue(toolCallListByRun, arg.TenantID, arg.RunID).Query(many(out))
}

func one[T any](out *T) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		v, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[T])
		if err == nil {
			*out = v
		}
		return err
	}
}

func many[T any](out *[]T) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		v, err := pgx.AppendRows(make([]T, 0), rows, pgx.RowToStructByPos[T])
		if err == nil {
			*out = v
		}
		return err
	}
}
