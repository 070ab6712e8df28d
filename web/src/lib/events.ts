// The run-event reducer behind the chat and the activity panel. Durable events (seq >= 1) are
// kept once each, in seq order, whatever mix of stored replay, live subscription and resent
// events brings them. Token deltas (seq 0, ephemeral) build a draft per model reply (callIndex),
// deduplicated by their index; a message.snapshot (seq 0: what a reply had streamed when the
// subscription joined) stands for the deltas up to its index; the reply's message.completed
// replaces the draft with the stored text, so a reply shows exactly once whether or not its
// deltas were seen.

export interface RunEventLike {
  seq: number;
  runId: string;
  type: string;
  phase?: string | null;
  data: unknown;
  timestamp: string;
}

export interface CompletedReply {
  messageId: string;
  content: string;
  callIndex: number;
  seq: number;
}

export interface Draft {
  callIndex: number;
  /** Delta texts by their index in the reply. */
  chunks: Record<number, string>;
}

export interface RunView {
  runId: string;
  /** Durable events, ascending seq, each once. */
  events: RunEventLike[];
  lastSeq: number;
  drafts: Record<number, Draft>;
  completed: Record<number, CompletedReply>;
}

export interface EventsState {
  runs: Record<string, RunView>;
}

export const emptyEvents: EventsState = { runs: {} };

function emptyRun(runId: string): RunView {
  return { runId, events: [], lastSeq: 0, drafts: {}, completed: {} };
}

function obj(data: unknown): Record<string, unknown> {
  if (typeof data === 'string') {
    try {
      return JSON.parse(data) as Record<string, unknown>;
    } catch {
      return {};
    }
  }
  return (data ?? {}) as Record<string, unknown>;
}

export type EventsAction = { type: 'event'; event: RunEventLike } | { type: 'events'; events: RunEventLike[] } | { type: 'reset' };

/** Applies one event; returns the same state object when the event changes nothing. */
export function applyEvent(state: EventsState, ev: RunEventLike): EventsState {
  const run = state.runs[ev.runId] ?? emptyRun(ev.runId);
  const data = obj(ev.data);
  if (ev.type === 'message.delta' && (!ev.seq || ev.seq <= 0)) {
    const callIndex = Number(data.callIndex ?? 0);
    const index = Number(data.index ?? 0);
    if (run.completed[callIndex]) return state; // the stored reply is already shown
    const d = run.drafts[callIndex] ?? { callIndex, chunks: {} };
    if (d.chunks[index] !== undefined) return state;
    const next: RunView = {
      ...run,
      drafts: { ...run.drafts, [callIndex]: { callIndex, chunks: { ...d.chunks, [index]: String(data.text ?? '') } } },
    };
    return { runs: { ...state.runs, [ev.runId]: next } };
  }
  if (ev.type === 'message.snapshot' && (!ev.seq || ev.seq <= 0)) {
    const callIndex = Number(data.callIndex ?? 0);
    const index = Number(data.index ?? 0);
    if (run.completed[callIndex]) return state;
    // The snapshot's text stands at its last delta's index; the deltas before it are covered.
    const chunks: Record<number, string> = {};
    for (let i = 0; i < index; i++) chunks[i] = '';
    chunks[index] = String(data.text ?? '');
    const d = run.drafts[callIndex];
    if (d) for (const [i, text] of Object.entries(d.chunks)) if (Number(i) > index) chunks[Number(i)] = text;
    const next: RunView = { ...run, drafts: { ...run.drafts, [callIndex]: { callIndex, chunks } } };
    return { runs: { ...state.runs, [ev.runId]: next } };
  }
  if (!(ev.seq > 0)) return state;
  // Dedupe by seq: a binary search in the sorted list.
  const evs = run.events;
  let lo = 0;
  let hi = evs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (evs[mid].seq < ev.seq) lo = mid + 1;
    else hi = mid;
  }
  if (lo < evs.length && evs[lo].seq === ev.seq) return state;
  const events = evs.slice();
  events.splice(lo, 0, { seq: ev.seq, runId: ev.runId, type: ev.type, phase: ev.phase ?? null, data: ev.data, timestamp: ev.timestamp });
  const next: RunView = { ...run, events, lastSeq: Math.max(run.lastSeq, ev.seq) };
  if (ev.type === 'message.completed' && (data.role === undefined || data.role === 'ASSISTANT')) {
    const callIndex = Number(data.callIndex ?? 0);
    next.completed = {
      ...run.completed,
      [callIndex]: { messageId: String(data.messageId ?? ''), content: String(data.content ?? ''), callIndex, seq: ev.seq },
    };
    if (run.drafts[callIndex]) {
      const drafts = { ...run.drafts };
      delete drafts[callIndex];
      next.drafts = drafts;
    }
  }
  return { runs: { ...state.runs, [ev.runId]: next } };
}

export function eventsReducer(state: EventsState, a: EventsAction): EventsState {
  switch (a.type) {
    case 'event':
      return applyEvent(state, a.event);
    case 'events':
      return a.events.reduce(applyEvent, state);
    case 'reset':
      return emptyEvents;
  }
}

/** The draft's text in delta order, and whether its start was missed (deltas before a reload). */
export function draftText(d: Draft): { text: string; gap: boolean } {
  const idx = Object.keys(d.chunks)
    .map(Number)
    .sort((a, b) => a - b);
  let gap = idx.length > 0 && idx[0] > 0;
  for (let i = 1; i < idx.length; i++) if (idx[i] !== idx[i - 1] + 1) gap = true;
  return { text: idx.map((i) => d.chunks[i]).join(''), gap };
}

/** The last durable seq seen for a run (0: none): where a resubscription resumes. */
export function lastSeq(state: EventsState, runId: string): number {
  return state.runs[runId]?.lastSeq ?? 0;
}

const terminal = new Set(['execution.completed', 'execution.failed', 'execution.cancelled', 'execution.timed_out']);

/** True once the run's terminal event was seen (and not followed by a resume). */
export function runEnded(run: RunView | undefined): boolean {
  if (!run) return false;
  for (let i = run.events.length - 1; i >= 0; i--) {
    const t = run.events[i].type;
    if (terminal.has(t)) return true;
    if (t === 'execution.resumed' || t === 'execution.started') return false;
  }
  return false;
}
