import { describe, expect, it } from 'vitest';
import { applyEvent, draftText, emptyEvents, eventsReducer, lastSeq, runEnded, type EventsState, type RunEventLike } from './events';

const R = 'run1';
let clock = 0;
function ev(seq: number, type: string, data: Record<string, unknown> = {}): RunEventLike {
  return { seq, runId: R, type, data, timestamp: new Date(1_700_000_000_000 + clock++).toISOString() };
}
function delta(callIndex: number, index: number, text: string): RunEventLike {
  return ev(0, 'message.delta', { callIndex, index, text });
}
function completed(seq: number, callIndex: number, content: string): RunEventLike {
  return ev(seq, 'message.completed', { messageId: `m${callIndex}`, role: 'ASSISTANT', content, callIndex });
}
/** What the chat shows for the run: completed replies, then drafts. */
function shown(s: EventsState): string[] {
  const run = s.runs[R];
  const done = Object.values(run.completed)
    .sort((a, b) => a.callIndex - b.callIndex)
    .map((c) => c.content);
  const drafts = Object.values(run.drafts).map((d) => draftText(d).text);
  return [...done, ...drafts];
}

describe('events reducer', () => {
  it('starts a late draft from a snapshot and continues it with the later deltas only', () => {
    let s = emptyEvents;
    s = applyEvent(s, ev(1, 'execution.started'));
    s = applyEvent(s, ev(0, 'message.snapshot', { callIndex: 0, index: 2, text: 'Hello, wor' }));
    s = applyEvent(s, delta(0, 2, 'wor')); // covered by the snapshot
    s = applyEvent(s, delta(0, 3, 'ld'));
    expect(draftText(s.runs[R].drafts[0])).toEqual({ text: 'Hello, world', gap: false });
    s = applyEvent(s, completed(2, 0, 'Hello, world'));
    expect(shown(s)).toEqual(['Hello, world']);
  });

  it('keeps each durable event once, in seq order, whatever the delivery order', () => {
    let s = emptyEvents;
    for (const seq of [1, 2, 3, 2, 5, 4, 1, 5]) s = applyEvent(s, ev(seq, `t${seq}`));
    expect(s.runs[R].events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(lastSeq(s, R)).toBe(5);
  });

  it('returns the same state for a duplicate, so React skips the render', () => {
    const s = applyEvent(emptyEvents, ev(1, 'task.queued'));
    expect(applyEvent(s, ev(1, 'task.queued'))).toBe(s);
  });

  it('builds a draft from deltas, then the completed message replaces it: the text shows once', () => {
    let s = emptyEvents;
    s = applyEvent(s, ev(1, 'execution.started'));
    s = applyEvent(s, delta(0, 0, 'Hello'));
    s = applyEvent(s, delta(0, 1, ', wor'));
    s = applyEvent(s, delta(0, 1, ', wor')); // resent
    s = applyEvent(s, delta(0, 2, 'ld'));
    expect(shown(s)).toEqual(['Hello, world']);
    s = applyEvent(s, completed(2, 0, 'Hello, world'));
    expect(shown(s)).toEqual(['Hello, world']);
    expect(s.runs[R].drafts).toEqual({});
    // A late delta of the stored reply is ignored.
    s = applyEvent(s, delta(0, 3, '!!'));
    expect(shown(s)).toEqual(['Hello, world']);
  });

  it('resumes after a reload: stored events, then a replay after the last seq, with no duplicate text', () => {
    // Before the reload the page saw seq 1-3 and part of the second reply's deltas.
    let before = emptyEvents;
    before = eventsReducer(before, {
      type: 'events',
      events: [ev(1, 'execution.started'), completed(2, 0, 'First.'), ev(3, 'tool.completed'), delta(1, 0, 'Sec')],
    });
    const resumeAfter = lastSeq(before, R);
    expect(resumeAfter).toBe(3);

    // After the reload: the run's stored events are loaded, the subscription resumes after
    // seq 3 and also resends seq 3 (a reconnect), live deltas continue mid-reply.
    let after = eventsReducer(emptyEvents, {
      type: 'events',
      events: [ev(1, 'execution.started'), completed(2, 0, 'First.'), ev(3, 'tool.completed')],
    });
    after = applyEvent(after, ev(3, 'tool.completed'));
    after = applyEvent(after, delta(1, 2, 'ond'));
    const d = draftText(after.runs[R].drafts[1]);
    expect(d.gap).toBe(true); // the start was streamed before the reload
    after = applyEvent(after, completed(4, 1, 'Second.'));
    after = applyEvent(after, ev(5, 'execution.completed'));
    expect(shown(after)).toEqual(['First.', 'Second.']);
    expect(after.runs[R].events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(runEnded(after.runs[R])).toBe(true);
  });

  it('a continued run is not ended', () => {
    const s = eventsReducer(emptyEvents, { type: 'events', events: [ev(1, 'execution.failed'), ev(2, 'execution.resumed')] });
    expect(runEnded(s.runs[R])).toBe(false);
  });
});
