// Layout of a routine's graph for the read-only view: each step's column is its distance
// (edges followed forwards, breadth first) from the entry step; steps of one column are stacked
// in rows. Steps no edge reaches go after the others.

export type GraphStep = {
  key: string;
  name: string;
  type: string;
  phase?: string | null;
  entry: boolean;
  role?: { id: string; name: string; color: string } | null;
};
export type GraphEdge = { from: string; to: string; condition: string };

export type Layout = { nodes: Record<string, { col: number; row: number }>; columns: number; rows: number };

export function layoutGraph(steps: GraphStep[], edges: GraphEdge[]): Layout {
  const col: Record<string, number> = {};
  const entry = steps.find((s) => s.entry) ?? steps[0];
  if (entry) {
    col[entry.key] = 0;
    const queue = [entry.key];
    while (queue.length > 0) {
      const k = queue.shift()!;
      for (const e of edges) {
        if (e.from === k && col[e.to] === undefined && steps.some((s) => s.key === e.to)) {
          col[e.to] = col[k] + 1;
          queue.push(e.to);
        }
      }
    }
  }
  let maxCol = Math.max(-1, ...Object.values(col));
  for (const s of steps) {
    if (col[s.key] === undefined) col[s.key] = ++maxCol;
  }
  const perCol: Record<number, number> = {};
  const nodes: Layout['nodes'] = {};
  let rows = 0;
  for (const s of steps) {
    const c = col[s.key];
    const r = perCol[c] ?? 0;
    perCol[c] = r + 1;
    nodes[s.key] = { col: c, row: r };
    rows = Math.max(rows, r + 1);
  }
  return { nodes, columns: maxCol + 1, rows };
}
