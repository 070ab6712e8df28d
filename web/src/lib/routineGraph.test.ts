import { describe, expect, it } from 'vitest';
import { layoutGraph, type GraphStep } from './routineGraph';

const step = (key: string, entry = false): GraphStep => ({ key, name: key, type: 'AGENT', entry });

describe('layoutGraph', () => {
  it('puts steps in columns by distance from the entry, back edges aside', () => {
    const g = layoutGraph(
      [step('done'), step('impl', true), step('review'), step('test')],
      [
        { from: 'impl', to: 'review', condition: 'ALWAYS' },
        { from: 'review', to: 'impl', condition: 'ON_FAIL' },
        { from: 'review', to: 'test', condition: 'ON_PASS' },
        { from: 'test', to: 'done', condition: 'ON_PASS' },
      ],
    );
    expect(g.nodes).toEqual({ impl: { col: 0, row: 0 }, review: { col: 1, row: 0 }, test: { col: 2, row: 0 }, done: { col: 3, row: 0 } });
    expect(g.columns).toBe(4);
    expect(g.rows).toBe(1);
  });

  it('stacks branches and places unreachable steps last', () => {
    const g = layoutGraph(
      [step('a', true), step('b'), step('c'), step('lost')],
      [
        { from: 'a', to: 'b', condition: 'ON_PASS' },
        { from: 'a', to: 'c', condition: 'ON_FAIL' },
      ],
    );
    expect(g.nodes.b).toEqual({ col: 1, row: 0 });
    expect(g.nodes.c).toEqual({ col: 1, row: 1 });
    expect(g.nodes.lost).toEqual({ col: 2, row: 0 });
    expect(g.rows).toBe(2);
  });
});
