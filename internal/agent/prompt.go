package agent

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/agentry/agentry/internal/contextwin"
	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/settings"
)

func systemPrompt(conv dbsqlc.Conversation) string {
	if strings.TrimSpace(conv.SystemPrompt) == "" {
		return defaultSystemPrompt
	}
	return defaultSystemPrompt + "\n\n" + conv.SystemPrompt
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

// toLLM turns stored messages into the model's messages: tool results become user turns, and
// consecutive messages of one role merge (providers want alternating roles).
func toLLM(hist []dbsqlc.Message) []llm.Message {
	var out []llm.Message
	for _, m := range hist {
		var blocks []llm.Block
		if err := json.Unmarshal(m.Parts, &blocks); err != nil || len(blocks) == 0 {
			blocks = []llm.Block{{Type: llm.BlockText, Text: m.Content}}
		}
		role := llm.RoleUser
		switch m.Role {
		case "ASSISTANT":
			role = llm.RoleAssistant
		case "SYSTEM":
			// agentry's own notes (reflection summaries) reach the model as user-turn text.
			blocks = []llm.Block{{Type: llm.BlockText, Text: m.Content}}
		}
		if len(out) > 0 && out[len(out)-1].Role == role {
			out[len(out)-1].Blocks = append(out[len(out)-1].Blocks, blocks...)
			continue
		}
		out = append(out, llm.Message{Role: role, Blocks: blocks})
	}
	return closeToolUses(out)
}

func toolUses(blocks []llm.Block) []llm.Block {
	return llm.Response{Blocks: blocks}.ToolCalls()
}

func textOnly(blocks []llm.Block) []llm.Block {
	var out []llm.Block
	for _, b := range blocks {
		if b.Type == llm.BlockText {
			out = append(out, b)
		}
	}
	return out
}

// closeToolUses gives every tool_use a tool_result right after it: a call that never got one
// (its run was cancelled or failed first) is answered as not run, since providers refuse a
// conversation with an unanswered call.
func closeToolUses(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for i := 0; i < len(msgs); i++ {
		out = append(out, msgs[i])
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		var open []string
		for _, b := range msgs[i].Blocks {
			if b.Type == llm.BlockToolUse {
				open = append(open, b.ID)
			}
		}
		if len(open) == 0 {
			continue
		}
		answered := map[string]bool{}
		if i+1 < len(msgs) && msgs[i+1].Role == llm.RoleUser {
			for _, b := range msgs[i+1].Blocks {
				if b.Type == llm.BlockToolResult {
					answered[b.ToolUseID] = true
				}
			}
		}
		var missing []llm.Block
		for _, id := range open {
			if !answered[id] {
				missing = append(missing, llm.Block{Type: llm.BlockToolResult, ToolUseID: id, IsError: true, Content: "not run: the run ended before this call was executed"})
			}
		}
		if len(missing) == 0 {
			continue
		}
		if i+1 < len(msgs) && msgs[i+1].Role == llm.RoleUser {
			next := msgs[i+1]
			next.Blocks = append(missing, next.Blocks...)
			out = append(out, next)
			i++
		} else {
			out = append(out, llm.Message{Role: llm.RoleUser, Blocks: missing})
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
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
