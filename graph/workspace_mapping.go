package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentry/agentry/graph/model"
)

// workspaceProject decodes an optional project id and checks that the caller's tenant has the
// project (NOT_FOUND otherwise); nil means the default project.
func (r *Resolver) workspaceProject(ctx context.Context, projectID *string) (uuid.UUID, error) {
	var pid *uuid.UUID
	if projectID != nil && *projectID != "" {
		id, err := model.DecodeID("Project", *projectID)
		if err != nil {
			return uuid.Nil, err
		}
		pid = &id
	}
	return r.Workspaces.Project(ctx, pid)
}
