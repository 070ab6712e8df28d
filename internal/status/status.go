// Package status names the types of the status columns, so the rows sqlc generates
// (internal/db/dbsqlc) carry them. It sits below every domain and imports nothing: each
// domain aliases its type and declares its values (run.Status, run.ToolCallStatus, subagent.Status).
package status

// Run is the status of a run (runs.status) and of a team's phase (team_phases.status).
type Run string

// Subagent is the status of a sub-agent (subagents.status).
type Subagent string

// ToolCall is the status of a tool call (tool_calls.status).
type ToolCall string
