package graph

import (
	"strconv"

	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// messagesForward is the page of the first n of rows (one more telling of a next page); after
// says whether it starts after a cursor (so that messages come before it).
func messagesForward(rows []dbsqlc.Message, n int, after bool) *model.MessageConnection {
	conn := messageEdges(rows[:min(n, len(rows))])
	conn.PageInfo.HasNextPage, conn.PageInfo.HasPreviousPage = len(rows) > n, after
	return conn
}

// messagesBackward is the page of the last n of rows (one more, first, telling of a previous
// page); before says whether it ends before a cursor (so that messages come after it).
func messagesBackward(rows []dbsqlc.Message, n int, before bool) *model.MessageConnection {
	conn := messageEdges(rows[max(len(rows)-n, 0):])
	conn.PageInfo.HasPreviousPage, conn.PageInfo.HasNextPage = len(rows) > n, before
	return conn
}

func messageEdges(rows []dbsqlc.Message) *model.MessageConnection {
	conn := &model.MessageConnection{Edges: make([]*model.MessageEdge, 0, len(rows)), PageInfo: &model.PageInfo{}}
	for i := range rows {
		c := model.EncodeCursor("m", strconv.FormatInt(rows[i].Position, 10))
		conn.Edges = append(conn.Edges, &model.MessageEdge{Cursor: c, Node: &model.Message{Row: rows[i]}})
		if i == 0 {
			conn.PageInfo.StartCursor = &c
		}
		conn.PageInfo.EndCursor = &c
	}
	return conn
}
