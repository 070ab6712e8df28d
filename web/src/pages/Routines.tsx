import { useEffect } from 'react';
import { Link, useNavigate } from 'react-router';
import { useMutation, useQuery } from 'urql';
import { Badge, Empty, ErrorBox, Json, Loading } from '../components/ui';
import { dateTime } from '../lib/format';
import { RoutineRunQuery, Routines, RunRoutine } from '../lib/ops';
import { layoutGraph, type GraphEdge, type GraphStep } from '../lib/routineGraph';

export function RoutinesPage() {
  const [q] = useQuery({ query: Routines });
  const [run, runRoutine] = useMutation(RunRoutine);
  const navigate = useNavigate();
  const routines = q.data?.routines ?? [];
  return (
    <div className="page">
      <h1>Routines</h1>
      <p className="muted">
        A routine is a graph of steps worked by roles: agents implement, gates review and send work back with feedback,
        cron steps wait, lambdas check. Routines are made with <code>saveRoutine</code>; here they can be read and run.
      </p>
      <ErrorBox error={q.error ?? run.error} />
      {q.fetching && !q.data && <Loading what="routines" />}
      {q.data && routines.length === 0 && <Empty title="No routines yet.">Save one with the saveRoutine mutation (docs/api/multi-agent.md).</Empty>}
      <div className="grid">
        {routines.map((r) => (
          <div className="card" key={r.id} data-testid="routine">
            <div className="row">
              <strong>{r.name}</strong>
              <span className="badge">{r.trigger.replace('_', ' ').toLowerCase()}</span>
              {!r.active && <span className="badge">paused</span>}
              {r.cron && (
                <span className="muted small">
                  {r.cron} ({r.timezone}){r.nextFireAt && ` · next ${dateTime(r.nextFireAt)}`}
                </span>
              )}
              <span className="muted small">max retries {r.maxRetries}</span>
              <span className="spacer" />
              <button
                className="small primary"
                disabled={run.fetching}
                onClick={async () => {
                  const res = await runRoutine({ id: r.id });
                  if (res.data?.runRoutine) navigate(`/runs/${encodeURIComponent(res.data.runRoutine.id)}`);
                }}
              >
                Run
              </button>
            </div>
            {r.description && <p className="small">{r.description}</p>}
            <RoutineGraph steps={r.steps} edges={r.edges} />
            {r.runs.length > 0 && (
              <div className="row small" style={{ marginTop: '0.5rem' }}>
                Runs:
                {r.runs.map((x) => (
                  <Link key={x.id} to={`/runs/${encodeURIComponent(x.id)}`}>
                    <Badge value={x.status} /> {dateTime(x.createdAt)}
                  </Link>
                ))}
              </div>
            )}
          </div>
        ))}
      </div>
    </div>
  );
}

type StepStatus = Record<string, { status: 'passed' | 'failed' | 'current'; executions: number }>;

// RoutineGraph draws a routine's steps (coloured by role) and edges, read-only: columns by
// distance from the entry step, ON_PASS edges green, ON_FAIL red, ALWAYS grey.
export function RoutineGraph({ steps, edges, status }: { steps: GraphStep[]; edges: GraphEdge[]; status?: StepStatus }) {
  const g = layoutGraph(steps, edges);
  const W = 150;
  const H = 54;
  const gapX = 60;
  const gapY = 24;
  const width = g.columns * (W + gapX);
  const height = g.rows * (H + gapY) + 10;
  const pos = (key: string) => {
    const n = g.nodes[key];
    return { x: n.col * (W + gapX) + 5, y: n.row * (H + gapY) + 5 };
  };
  return (
    <div style={{ overflowX: 'auto' }} data-testid="routine-graph">
      <svg width={width} height={height} role="img" aria-label="routine graph">
        <defs>
          {['ALWAYS', 'ON_PASS', 'ON_FAIL'].map((c) => (
            <marker key={c} id={`arrow-${c}`} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M 0 0 L 10 5 L 0 10 z" fill={edgeColor(c)} />
            </marker>
          ))}
        </defs>
        {edges.map((e, i) => {
          if (!g.nodes[e.from] || !g.nodes[e.to]) return null;
          const a = pos(e.from);
          const b = pos(e.to);
          const back = g.nodes[e.to].col <= g.nodes[e.from].col;
          const x1 = a.x + W;
          const y1 = a.y + H / 2;
          const x2 = back ? b.x + W / 2 : b.x;
          const y2 = back ? b.y + H : b.y + H / 2;
          const d = back
            ? `M ${a.x + W / 2} ${a.y + H} C ${a.x + W / 2} ${a.y + H + 40}, ${x2} ${y2 + 40}, ${x2} ${y2}`
            : `M ${x1} ${y1} C ${x1 + gapX / 2} ${y1}, ${x2 - gapX / 2} ${y2}, ${x2} ${y2}`;
          return (
            <g key={i}>
              <path d={d} fill="none" stroke={edgeColor(e.condition)} strokeWidth={1.6} markerEnd={`url(#arrow-${e.condition})`} />
              <title>{`${e.from} → ${e.to} (${e.condition.toLowerCase().replace('_', ' ')})`}</title>
            </g>
          );
        })}
        {steps.map((s) => {
          const p = pos(s.key);
          const color = s.role?.color ?? '#8a8f98';
          const st = status?.[s.key];
          return (
            <g key={s.key} data-testid="routine-step">
              <rect
                x={p.x}
                y={p.y}
                width={W}
                height={H}
                rx={8}
                fill={color + '22'}
                stroke={st?.status === 'current' ? '#2563eb' : color}
                strokeWidth={st?.status === 'current' ? 3 : s.entry ? 2.5 : 1.5}
                strokeDasharray={s.type === 'TERMINAL' || s.type === 'TERMINAL_FAIL' ? '4 3' : undefined}
              />
              <rect x={p.x} y={p.y} width={6} height={H} rx={3} fill={color} />
              <text x={p.x + 14} y={p.y + 20} fontSize="13" fontWeight={600} fill="currentColor">
                {s.name.length > 18 ? s.name.slice(0, 17) + '…' : s.name}
              </text>
              <text x={p.x + 14} y={p.y + 38} fontSize="11" fill="currentColor" opacity={0.7}>
                {s.type.toLowerCase().replace('_', ' ')}
                {s.role ? ` · ${s.role.name.length > 12 ? s.role.name.slice(0, 11) + '…' : s.role.name}` : ''}
                {st && st.status !== 'current' ? ` · ${st.status === 'passed' ? '✓' : '✗'}${st.executions > 1 ? ` ×${st.executions}` : ''}` : ''}
              </text>
              <title>{`${s.name} (${s.key}): ${s.type}${s.phase ? `, ${s.phase.toLowerCase()}` : ''}${s.role ? `, role ${s.role.name}` : ''}`}</title>
            </g>
          );
        })}
      </svg>
    </div>
  );
}

function edgeColor(c: string) {
  return c === 'ON_PASS' ? '#16a34a' : c === 'ON_FAIL' ? '#dc2626' : '#8a8f98';
}

// RoutineRunPanel is a routine run's steps coloured by role, with live status (it reloads when
// the run page sees a new event: version), its step results and its context.
export function RoutineRunPanel({ runId, version, active }: { runId: string; version: number; active: boolean }) {
  const [q, refetch] = useQuery({ query: RoutineRunQuery, variables: { runId } });
  useEffect(() => {
    if (version > 0) refetch({ requestPolicy: 'network-only' });
  }, [version]); // eslint-disable-line react-hooks/exhaustive-deps
  const rr = q.data?.routineRun;
  if (!rr) return q.fetching ? <Loading what="the routine" /> : null;
  const status: StepStatus = {};
  for (const r of rr.stepResults) {
    status[r.stepKey] = { status: r.passed ? 'passed' : 'failed', executions: r.executionCount };
  }
  if (active && rr.currentStep) {
    status[rr.currentStep] = { status: 'current', executions: status[rr.currentStep]?.executions ?? 0 };
  }
  return (
    <div data-testid="routine-run">
      <h2>Routine {rr.routine?.name}</h2>
      <div className="grid cols-4">
        <div className="card">
          <div className="muted small">Step executions</div>
          <strong>{rr.metrics.executions}</strong>
        </div>
        <div className="card">
          <div className="muted small">Input tokens</div>
          <strong>{rr.metrics.inputTokens}</strong>
        </div>
        <div className="card">
          <div className="muted small">Output tokens</div>
          <strong>{rr.metrics.outputTokens}</strong>
        </div>
        <div className="card">
          <div className="muted small">Current step</div>
          <strong>{rr.currentStep ?? '—'}</strong>
        </div>
      </div>
      {rr.routine && <RoutineGraph steps={rr.routine.steps} edges={rr.routine.edges} status={status} />}
      <h3>Steps</h3>
      {rr.stepResults.length === 0 && <p className="muted">No step has finished yet.</p>}
      <div className="grid">
        {rr.stepResults.map((r) => {
          const color = r.roleColor ?? r.role?.color ?? '#8a8f98';
          return (
            <div className="card" key={`${r.stepKey}-${r.executionCount}`} data-testid="step-result" style={{ borderLeft: `6px solid ${color}` }}>
              <div className="row">
                <strong>{r.stepName}</strong>
                <span className="badge">{r.stepType.toLowerCase().replace('_', ' ')}</span>
                {r.role && <span className="small" style={{ color }}>{r.role.name}</span>}
                <Badge value={r.passed ? 'COMPLETED' : 'FAILED'} />
                <span className="spacer" />
                <span className="muted small">
                  #{r.executionCount} · {r.inputTokens}/{r.outputTokens} tokens · {(r.durationMs / 1000).toFixed(1)} s
                </span>
              </div>
              {r.output && <p className="small" style={{ whiteSpace: 'pre-wrap' }}>{r.output}</p>}
              {r.data != null && (
                <details>
                  <summary className="small">data</summary>
                  <Json value={r.data} />
                </details>
              )}
            </div>
          );
        })}
      </div>
      <details style={{ marginTop: '1rem' }}>
        <summary>Routine context</summary>
        <Json value={rr.context} />
      </details>
    </div>
  );
}
