package graph

import (
	"encoding/base64"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/chat"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// attachments decodes sendMessage's attachments (base64 content); a bad encoding is
// BAD_USER_INPUT naming the attachment. What the files may be is the chat service's to check.
func attachments(in []*model.AttachmentInput) ([]chat.Attachment, error) {
	if len(in) > chat.MaxAttachments {
		return nil, apperr.Invalid("attachments", "%d files sent; at most %d are accepted per message", len(in), chat.MaxAttachments)
	}
	out := make([]chat.Attachment, 0, len(in))
	for i, a := range in {
		if a == nil {
			continue
		}
		if base64.StdEncoding.DecodedLen(len(a.DataBase64)) > chat.MaxAttachmentBytes+3 {
			return nil, apperr.Invalid(fmt.Sprintf("attachments[%d]", i), "%s is larger than %d bytes (5 MiB), the most accepted per file", a.Filename, chat.MaxAttachmentBytes).With("limit", chat.MaxAttachmentBytes)
		}
		data, err := base64.StdEncoding.DecodeString(a.DataBase64)
		if err != nil {
			if data, err = base64.RawStdEncoding.DecodeString(a.DataBase64); err != nil {
				return nil, apperr.Invalid(fmt.Sprintf("attachments[%d].dataBase64", i), "is not base64 (standard alphabet)")
			}
		}
		out = append(out, chat.Attachment{Filename: a.Filename, MediaType: a.MediaType, Data: data})
	}
	return out, nil
}

// optionalID decodes an optional global id of typ (uuid.Nil when absent).
func optionalID(typ string, id *string) (uuid.UUID, error) {
	if id == nil || *id == "" {
		return uuid.Nil, nil
	}
	return model.DecodeID(typ, *id)
}

func memoryConnection(rows []dbsqlc.Memory, n int) *model.MemoryConnection {
	conn := &model.MemoryConnection{Edges: []*model.MemoryEdge{}, PageInfo: &model.PageInfo{HasNextPage: len(rows) > n}}
	for i := range rows[:min(n, len(rows))] {
		c := model.EncodeCursor("mem", rows[i].ID.String())
		conn.Edges = append(conn.Edges, &model.MemoryEdge{Cursor: c, Node: &model.Memory{Row: rows[i]}})
		conn.PageInfo.EndCursor = &c
	}
	return conn
}
