// Package task holds tasks, the units of work of a project (title, description, acceptance
// criteria, tags, type, priority, complexity and a status), and task runs: runTask starts a run
// of kind TASK that works on the task in a conversation of its own until the model says it is
// done, and the run's start and end move the task's status. See ARCHITECTURE.md.
//
// # Limits of a task run
//
// A task run is bounded by the executor's limits (Hooks.Limits). The base limits are 100 turns
// (model calls) and 30 minutes of wall-clock time from the run's first start, with a long-task
// confirmation (the run pauses and asks the user to go on) every 20 turns. The task's
// complexity scales the turn and duration limits; the confirmation interval is not scaled:
//
//	complexity  factor  max turns  max duration  confirm every
//	SIMPLE      0.5x     50        15 min        20 turns
//	STANDARD    1x      100        30 min        20 turns
//	COMPLEX     2x      200        60 min        20 turns
package task
