// Package status names the types of the status columns, so the rows sqlc generates
// (internal/db/dbsqlc, see sqlc.yaml) carry them. It sits below every domain and imports
// nothing: each domain aliases its type and declares its values (run.Status and
// run.StatusCompleted, approval.Status, ...).
package status

// Approval is the status of an approval (approvals.status).
type Approval string

// Run is the status of a run (runs.status) and of a team's phase (team_phases.status).
type Run string

// Subagent is the status of a sub-agent (subagents.status); a sub-agent ends with its run's
// status.
type Subagent string

// Task is the status of a task (tasks.status).
type Task string

// ToolCall is the status of a tool call (tool_calls.status).
type ToolCall string

// WebhookDelivery is the status of a webhook delivery (webhook_deliveries.status).
type WebhookDelivery string
