package model

import (
	"bytes"
	"encoding/json"

	"github.com/google/uuid"
)

// idFields names the type of every id that event data and error extensions carry, by key.
// Storage and the executor name objects by uuid; the edge hands clients the global ids every
// argument takes (resolveApproval(id: <approvalId of approval.requested>)).
var idFields = map[string]string{
	"runId":          "Run",
	"subagentId":     "Subagent",
	"childRunId":     "Run",
	"parentRunId":    "Run",
	"activeRunId":    "Run",
	"queuedBehind":   "Run",
	"conversationId": "Conversation",
	"messageId":      "Message",
	"toolCallId":     "ToolCall",
	"approvalId":     "Approval",
	"taskId":         "Task",
	"snapshotId":     "Snapshot",
	"projectId":      "Project",
	"budgetId":       "Budget",
	"userId":         "User",
	"decidedBy":      "User",
}

// GlobalIDValue returns v, the value of key in error extensions, as a global id when key names
// an object and v is its uuid (as a uuid.UUID or a string); anything else is returned as is.
func GlobalIDValue(key string, v any) any {
	typ := idFields[key]
	if typ == "" {
		return v
	}
	switch id := v.(type) {
	case uuid.UUID:
		return EncodeID(typ, id)
	case string:
		if u, err := uuid.Parse(id); err == nil {
			return EncodeID(typ, u)
		}
	}
	return v
}

// idKeyHint is in the encoding of every key of idFields but queuedBehind and decidedBy: data
// without any of the three has no id to rewrite (a token delta's, say) and is passed on as is.
var idKeyHint = []byte(`Id"`)

// EventData returns an event's data with the top-level ids of idFields as global ids. Nested
// values (a tool call's arguments, say) are the model's or the user's and are left alone, and
// so is data that is not a JSON object.
func EventData(data json.RawMessage) json.RawMessage {
	if len(data) == 0 || data[0] != '{' ||
		(!bytes.Contains(data, idKeyHint) && !bytes.Contains(data, []byte(`"queuedBehind"`)) && !bytes.Contains(data, []byte(`"decidedBy"`))) {
		return data
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return data
	}
	changed := false
	for k, raw := range fields {
		typ := idFields[k]
		if typ == "" || len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		u, err := uuid.Parse(s)
		if err != nil {
			continue
		}
		if u == uuid.Nil {
			fields[k] = json.RawMessage("null")
		} else {
			fields[k], _ = json.Marshal(EncodeID(typ, u))
		}
		changed = true
	}
	if !changed {
		return data
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return data
	}
	return out
}
