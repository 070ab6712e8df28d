package contextwin

import (
	"encoding/json"

	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/llm"
)

// Token estimates: about four characters (bytes of UTF-8) per token, a fixed cost per image.
// They are deliberately rough and never call a tokenizer: the safety margin absorbs the error.
const (
	CharsPerToken = 4
	ImageTokens   = 1000
)

// EstimateText is the token estimate of s: about 4 characters per token, rounding up.
func EstimateText(s string) int { return (len(s) + CharsPerToken - 1) / CharsPerToken }

// EstimateBlocks is the token estimate of content blocks: their text, tool calls (name and
// arguments), tool results, and ImageTokens per image.
func EstimateBlocks(blocks []llm.Block) int {
	n := 0
	for _, b := range blocks {
		switch b.Type {
		case llm.BlockImage:
			n += ImageTokens
		case llm.BlockToolUse:
			n += EstimateText(b.Name) + EstimateText(string(b.Input))
		case llm.BlockToolResult:
			n += EstimateText(b.Content)
		default:
			n += EstimateText(b.Text)
		}
	}
	return n
}

// Tokens is a stored message's token estimate: its token_estimate column, written with the
// message (EstimateMessage of what was stored), so a turn never re-reads the parts of the
// messages in its window to count them; EstimateMessage when the column is 0 (a message built
// in memory).
func Tokens(m dbsqlc.Message) int {
	if m.TokenEstimate > 0 {
		return int(m.TokenEstimate)
	}
	return EstimateMessage(m)
}

// EstimateMessage is the token estimate of a stored message as the model will see it (its
// parts; its content when it has none).
func EstimateMessage(m dbsqlc.Message) int { return EstimateBlocks(blocksOf(m)) }

// EstimateTools is the token estimate of the tool specs offered with a request.
func EstimateTools(tools []llm.ToolSpec) int {
	n := 0
	for _, t := range tools {
		n += EstimateText(t.Name) + EstimateText(t.Description) + EstimateText(string(t.Parameters))
	}
	return n
}

// EstimateRequest is the token estimate of a whole request: system prompt, messages and tools.
func EstimateRequest(req llm.Request) int {
	n := EstimateText(req.System) + EstimateTools(req.Tools)
	for _, m := range req.Messages {
		n += EstimateBlocks(m.Blocks)
	}
	return n
}

// blocksOf reads a stored message's content blocks the way the executor sends them: its parts,
// or its content as one text block; agentry's own notes (SYSTEM) are their text.
func blocksOf(m dbsqlc.Message) []llm.Block {
	var blocks []llm.Block
	if m.Role != "SYSTEM" {
		if err := json.Unmarshal(m.Parts, &blocks); err == nil && len(blocks) > 0 {
			return blocks
		}
	}
	return []llm.Block{{Type: llm.BlockText, Text: m.Content}}
}
