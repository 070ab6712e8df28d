package graph

import (
	"github.com/agentry/agentry/graph/model"
	"github.com/agentry/agentry/internal/db/dbsqlc"
	"github.com/agentry/agentry/internal/task"
)

// The helpers below map tasks onto the edge's types.

func taskConnection(rows []dbsqlc.Task, n int) *model.TaskConnection {
	conn := &model.TaskConnection{Edges: []*model.TaskEdge{}, PageInfo: &model.PageInfo{HasNextPage: len(rows) > n}}
	for i := range rows[:min(n, len(rows))] {
		c := model.EncodeCursor("t", rows[i].ID.String())
		conn.Edges = append(conn.Edges, &model.TaskEdge{Cursor: c, Node: &model.Task{Row: rows[i]}})
		conn.PageInfo.EndCursor = &c
	}
	return conn
}

func newTask(in model.CreateTaskInput) task.NewTask {
	out := task.NewTask{Title: in.Title, Description: deref(in.Description), AcceptanceCriteria: deref(in.AcceptanceCriteria), Tags: in.Tags}
	if in.Priority != nil {
		out.Priority = string(*in.Priority)
	}
	if in.Type != nil {
		out.Type = string(*in.Type)
	}
	if in.Complexity != nil {
		out.Complexity = string(*in.Complexity)
	}
	return out
}

func taskPatch(in model.UpdateTaskInput) task.Patch {
	return task.Patch{
		Title: in.Title, Description: in.Description, AcceptanceCriteria: in.AcceptanceCriteria, Tags: in.Tags,
		Status: (*string)(in.Status), Priority: (*string)(in.Priority), Type: (*string)(in.Type), Complexity: (*string)(in.Complexity),
	}
}
