import { useEffect, useReducer, useRef, useState } from 'react';
import { Link, useParams } from 'react-router';
import { useMutation, useQuery, useSubscription } from 'urql';
import { Badge, Empty, ErrorBox, Json, Loading } from '../components/ui';
import { Markdown } from '../components/Markdown';
import { session } from '../lib/client';
import { dateTime, duration, money, time, tokens } from '../lib/format';
import { emptyEvents, eventsReducer, type RunEventLike } from '../lib/events';
import { CancelSubagent, ResolveApproval, RunEvents, RunPage as RunPageQuery, RunSubagents, Runs } from '../lib/ops';
import type { RunKind, RunPageQuery as RunPageResult, RunStatus } from '../gql/graphql';
import { RoutineRunPanel } from './Routines';

const STATUSES: RunStatus[] = ['QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];
const KINDS: RunKind[] = ['CHAT_TURN', 'TASK', 'ROUTINE', 'SUBAGENT', 'TEAM', 'TEAM_PHASE'];

export function RunsPage() {
  const [status, setStatus] = useState<RunStatus | ''>('');
  const [kind, setKind] = useState<RunKind | ''>('');
  const [after, setAfter] = useState<string | null>(null);
  const [q] = useQuery({ query: Runs, variables: { status: status ? [status] : null, kind: kind ? [kind] : null, after } });
  const runs = q.data?.runs.edges.map((e) => e.node) ?? [];
  const admin = session.viewer?.role === 'OWNER' || session.viewer?.role === 'ADMIN';
  return (
    <div className="page">
      <h1>Runs</h1>
      <p className="muted small">{admin ? 'Every run of the organisation, newest first.' : 'Your runs, newest first.'}</p>
      <div className="row" style={{ marginBottom: '1rem' }}>
        <label className="check">
          Status
          <select aria-label="Status filter" value={status} onChange={(e) => { setStatus(e.target.value as RunStatus | ''); setAfter(null); }}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s.replace('_', ' ').toLowerCase()}
              </option>
            ))}
          </select>
        </label>
        <label className="check">
          Kind
          <select aria-label="Kind filter" value={kind} onChange={(e) => { setKind(e.target.value as RunKind | ''); setAfter(null); }}>
            <option value="">any</option>
            {KINDS.map((k) => (
              <option key={k} value={k}>
                {k.replace('_', ' ').toLowerCase()}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorBox error={q.error} />
      {q.fetching && !q.data && <Loading what="runs" />}
      {q.data && runs.length === 0 && (
        <Empty title="No runs match.">
          Runs appear when you send a message in <Link to="/chat">Chat</Link> or run a <Link to="/tasks">task</Link>.
        </Empty>
      )}
      {runs.length > 0 && (
        <div className="card table-wrap">
          <table>
            <thead>
              <tr>
                <th>Run</th>
                <th>Status</th>
                <th className="hide-phone">Kind</th>
                {admin && <th className="hide-phone">By</th>}
                <th className="num hide-phone">Turns</th>
                <th className="num">Tokens</th>
                <th className="num">Cost</th>
                <th className="hide-phone">Started</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr key={r.id}>
                  <td>
                    <Link to={`/runs/${encodeURIComponent(r.id)}`}>{r.conversation?.title || r.task?.title || r.kind.replace('_', ' ').toLowerCase()}</Link>
                    {r.terminationReason && <div className="muted small">{r.terminationReason.replace(/_/g, ' ')}</div>}
                  </td>
                  <td>
                    <Badge value={r.status} />
                  </td>
                  <td className="hide-phone">{r.kind.replace('_', ' ').toLowerCase()}</td>
                  {admin && <td className="hide-phone">{r.user.email}</td>}
                  <td className="num hide-phone">{r.turns}</td>
                  <td className="num">{tokens(r.inputTokens + r.outputTokens)}</td>
                  <td className="num">{money(r.costMicros)}</td>
                  <td className="hide-phone">{dateTime(r.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {q.data?.runs.pageInfo.hasNextPage && (
            <div className="row end" style={{ marginTop: '0.5rem' }}>
              <button onClick={() => setAfter(q.data?.runs.pageInfo.endCursor ?? null)}>Older runs</button>
            </div>
          )}
        </div>
      )}
    </div>
  );
}

const ACTIVE = new Set(['QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL', 'WAITING']);

/** Follows a run that has not ended: its events as they happen, and a refetch of the rest. */
function Follow({ runId, afterSeq, onEvent }: { runId: string; afterSeq: number; onEvent: (e: RunEventLike) => void }) {
  const [start] = useState(afterSeq);
  useSubscription({ query: RunEvents, variables: { runId, afterSeq: start } }, (_p: unknown, d) => {
    onEvent(d.runEvents as RunEventLike);
    return d;
  });
  return null;
}

export function RunPage() {
  const { id = '' } = useParams();
  const [q, refetch] = useQuery({ query: RunPageQuery, variables: { id } });
  const [live, dispatch] = useReducer(eventsReducer, emptyEvents);
  const timer = useRef<number | null>(null);
  useEffect(() => () => {
    if (timer.current !== null) window.clearTimeout(timer.current);
  }, []);
  const stored = q.data?.run;
  useEffect(() => {
    if (stored) dispatch({ type: 'events', events: stored.events as RunEventLike[] });
  }, [stored]);
  const onEvent = (e: RunEventLike) => {
    dispatch({ type: 'event', event: e });
    if (e.seq > 0 && timer.current === null) {
      timer.current = window.setTimeout(() => {
        timer.current = null;
        refetch({ requestPolicy: 'network-only' });
      }, 300);
    }
  };
  const run = q.data?.run;
  if (q.error && !run) return <div className="page"><ErrorBox error={q.error} /></div>;
  if (!run) return <div className="page">{q.fetching ? <Loading what="the run" /> : <Empty title="This run does not exist." />}</div>;
  const events = live.runs[run.id]?.events ?? run.events;
  return (
    <div className="page" data-testid="run-page">
      {ACTIVE.has(run.status) && <Follow runId={run.id} afterSeq={live.runs[run.id]?.lastSeq ?? 0} onEvent={onEvent} />}
      <div className="row">
        <h1 style={{ margin: 0 }}>{run.conversation?.title || run.task?.title || 'Run'}</h1>
        <Badge value={run.status} />
        <span className="spacer" />
        {run.conversation && <Link to={`/chat/${encodeURIComponent(run.conversation.id)}`}>Open the conversation</Link>}
      </div>
      <p className="muted small">
        {run.kind.replace('_', ' ').toLowerCase()} · by {run.user.email} · started {dateTime(run.startedAt ?? run.createdAt)} · {duration(run.startedAt ?? run.createdAt, run.finishedAt)}
        {/* A team run is worked through its phases' runs (their attempts are theirs): it counts
            them instead. A run no worker took yet has made no attempt. */}
        {run.team ? ` · ${run.team.phases.length} ${run.team.phases.length === 1 ? 'phase' : 'phases'}` : run.attempt > 0 ? ` · attempt ${run.attempt} of ${run.maxAttempts}` : ''}
      </p>
      {(run.error || run.failureClass || run.terminationReason) && (
        <div className={run.status === 'COMPLETED' ? 'success' : run.status === 'CANCELLED' ? 'notice' : 'error'} style={{ marginBottom: '1rem' }}>
          {run.failureClass && <strong>{run.failureClass.toLowerCase()} failure. </strong>}
          {run.terminationReason && <>Ended: {run.terminationReason.replace(/_/g, ' ')}. </>}
          {run.error}
        </div>
      )}
      <div className="grid cols-4">
        {/* A team run's turns and usage are its phases' (their runs make the model calls). */}
        <Stat label="Turns" value={String(run.team ? run.team.phases.reduce((n, p) => n + p.turns, 0) : run.turns)} />
        <Stat label="Input tokens" value={tokens(run.kind === 'TEAM' ? run.totalInputTokens : run.inputTokens)} />
        <Stat label="Output tokens" value={tokens(run.kind === 'TEAM' ? run.totalOutputTokens : run.outputTokens)} />
        <Stat label="Cost" value={money(run.kind === 'TEAM' ? run.totalCostMicros : run.costMicros)} />
      </div>
      {run.parentRun && (
        <p className="small">
          Sub-agent of <Link to={`/runs/${encodeURIComponent(run.parentRun.id)}`}>its parent run</Link> <Badge value={run.parentRun.status} />
        </p>
      )}
      {run.subagents.length > 0 && (
        <>
          <h2>Sub-agents</h2>
          <p className="muted small">
            With its sub-agents: {tokens(run.totalInputTokens)} in / {tokens(run.totalOutputTokens)} out · {money(run.totalCostMicros)}
          </p>
          <SubagentTree nodes={run.subagents as SubagentNode[]} />
        </>
      )}
      {run.kind === 'ROUTINE' && (
        <RoutineRunPanel runId={run.id} version={live.runs[run.id]?.lastSeq ?? 0} active={ACTIVE.has(run.status)} />
      )}
      {run.team && <TeamTimeline team={run.team} />}
      <h2>Tool calls</h2>
      {run.toolCalls.length === 0 ? (
        <p className="muted">No tool calls.</p>
      ) : (
        <div className="grid">
          {run.toolCalls.map((c) => (
            <details className="tool" key={c.id} data-testid="tool-card">
              <summary>
                <span className="name">{c.name}</span>
                <Badge value={c.status} />
                <span className="muted small">risk {c.risk}</span>
              </summary>
              <div className="body">
                <Json value={c.arguments} />
                {c.output && <pre>{c.output}</pre>}
                {c.error && <pre className="error">{c.error}</pre>}
              </div>
            </details>
          ))}
        </div>
      )}
      <h2>Approvals</h2>
      {run.approvals.length === 0 ? (
        <p className="muted">No approvals.</p>
      ) : (
        <div className="card table-wrap">
          <table>
            <thead>
              <tr>
                <th>Kind</th>
                <th>Status</th>
                <th>Tool</th>
                <th>Asked</th>
              </tr>
            </thead>
            <tbody>
              {run.approvals.map((a) => (
                <tr key={a.id}>
                  <td>{a.kind.replace('_', ' ')}</td>
                  <td>
                    <Badge value={a.status} />
                  </td>
                  <td>{a.toolCall?.name ?? '—'}</td>
                  <td>{dateTime(a.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2>Event timeline</h2>
      <div className="card">
        <ol className="timeline" data-testid="timeline">
          {events.map((e) => (
            <li key={e.seq} title={JSON.stringify(e.data)}>
              <span className="seq">{e.seq}</span>
              <span className="t">{time(e.timestamp)}</span>
              <span className={`type${/failed|cancelled|timed_out/.test(e.type) ? ' bad' : ''}`}>
                {e.type}
                {summary(e.type, e.data) && <span className="muted"> · {summary(e.type, e.data)}</span>}
              </span>
            </li>
          ))}
        </ol>
      </div>
    </div>
  );
}

type TeamView = NonNullable<NonNullable<RunPageResult['run']>['team']>;

// TeamTimeline shows a team run's phases in the order they ran: each phase with its
// iteration, model, status, turns, tokens and time, its output, and the reviewer's verdict.
function TeamTimeline({ team }: { team: TeamView }) {
  return (
    <>
      <h2>Team phases</h2>
      <p className="muted small">
        Goal: {team.goal} · {tokens(team.tokensUsed)} of {tokens(team.tokenBudget)} tokens · at most {team.maxIterations} iteration{team.maxIterations === 1 ? '' : 's'}
      </p>
      {team.phases.length === 0 ? (
        <p className="muted">No phase has started yet.</p>
      ) : (
        <ol className="team-timeline" data-testid="team-timeline">
          {team.phases.map((p) => (
            <li key={p.run.id} className={`team-phase phase-${p.phase.toLowerCase()}`} data-testid="team-phase">
              <div className="row">
                <strong>{p.phase.charAt(0) + p.phase.slice(1).toLowerCase()}</strong>
                <span className="muted small">
                  iteration {p.iteration}
                  {p.attempt > 1 ? ` (asked again)` : ''}
                </span>
                <Badge value={p.status} />
                <span className="spacer" />
                <Link to={`/runs/${encodeURIComponent(p.run.id)}`} className="small">
                  phase run
                </Link>
              </div>
              <p className="muted small">
                {p.model} · {p.turns} turn{p.turns === 1 ? '' : 's'} · {tokens(p.tokens)} tokens · {duration(p.startedAt, p.finishedAt)}
                {p.terminationReason ? ` · ${p.terminationReason.replace(/_/g, ' ')}` : ''}
              </p>
              {p.verdict && (
                <div className={p.verdict.verdict === 'APPROVE' ? 'success' : p.verdict.verdict === 'BLOCK' ? 'error' : 'notice'}>
                  <strong>{p.verdict.verdict.replace('_', ' ').toLowerCase()}</strong>: {p.verdict.summary}
                  {p.verdict.issues.length > 0 && (
                    <ul>
                      {p.verdict.issues.map((is, i) => (
                        <li key={i}>
                          {is.file && <code>{is.file}</code>} {is.problem}
                          {is.suggestion && <span className="muted"> ({is.suggestion})</span>}
                        </li>
                      ))}
                    </ul>
                  )}
                </div>
              )}
              {p.output && !p.verdict && (
                <details>
                  <summary className="small">{p.phase === 'ARCHITECT' ? 'Plan' : 'Output'}</summary>
                  <pre>{p.output}</pre>
                </details>
              )}
            </li>
          ))}
        </ol>
      )}
    </>
  );
}

function summary(type: string, data: unknown): string {
  const d = (data ?? {}) as Record<string, unknown>;
  if (type.startsWith('tool.')) return String(d.name ?? d.tool ?? '');
  if (type === 'usage.recorded') return `${d.inputTokens ?? '?'} in / ${d.outputTokens ?? '?'} out`;
  if (type.startsWith('execution.') && d.terminationReason) return String(d.terminationReason);
  if (type === 'approval.requested') return String(d.kind ?? '');
  if (type.startsWith('subagent.')) return [String(d.role ?? '').toLowerCase(), d.error ? String(d.error) : ''].filter(Boolean).join(': ');
  if (type.startsWith('team.phase.')) return `${String(d.phase ?? '').toLowerCase()} ${d.iteration ?? ''}`;
  if (type === 'team.review.decision') return String(d.verdict ?? '');
  if (type === 'team.run.failed' || type === 'team.run.completed') return String(d.reason ?? '');
  return '';
}

export function Stat({ label, value }: { label: string; value: string }) {
  return (
    <div className="card stat">
      <div className="label">{label}</div>
      <div className="value">{value}</div>
    </div>
  );
}

/** A sub-agent as the run page reads it. */
type SubagentNode = {
  id: string;
  role: string;
  goal: string;
  status: string;
  priority: number;
  depth: number;
  result?: string | null;
  error?: string | null;
  failureClass?: string | null;
  startedAt?: string | null;
  finishedAt?: string | null;
  createdAt: string;
  run?: { id: string; inputTokens?: number; outputTokens?: number } | null;
  approval?: { id: string; status: string; expiresAt: string } | null;
};

const SUB_ACTIVE = new Set(['PENDING', 'AWAITING_APPROVAL', 'QUEUED', 'RUNNING']);

/**
 * The tree of a run's sub-agents with their status. The run page refetches the first level on
 * each of its events (subagent.* are on the parent's stream); a sub-agent's own sub-agents load
 * when it is opened and follow that sub-agent's run events while it has not ended.
 */
function SubagentTree({ nodes }: { nodes: SubagentNode[] }) {
  const [, cancel] = useMutation(CancelSubagent);
  const [decided, decide] = useMutation(ResolveApproval);
  return (
    <ul className="subagent-tree" data-testid="subagent-tree">
      {nodes.map((s) => (
        <li key={s.id} data-testid="subagent" data-status={s.status}>
          <div className="row">
            <Badge value={s.status} />
            <strong>{s.role.toLowerCase()}</strong>
            <span className="muted small">priority {s.priority}</span>
            {s.run && (
              <Link className="small" to={`/runs/${encodeURIComponent(s.run.id)}`}>
                {s.goal.length > 80 ? s.goal.slice(0, 80) + '…' : s.goal}
              </Link>
            )}
            <span className="spacer" />
            {s.run && <span className="muted small">{tokens((s.run.inputTokens ?? 0) + (s.run.outputTokens ?? 0))} tokens</span>}
            <span className="muted small">{duration(s.startedAt ?? s.createdAt, s.finishedAt)}</span>
            {s.status === 'AWAITING_APPROVAL' && s.approval?.status === 'PENDING' && (
              <>
                <button className="small" data-testid="subagent-approve" disabled={decided.fetching} onClick={() => void decide({ id: s.approval!.id, decision: 'APPROVE' })}>
                  Approve
                </button>
                <button className="small" data-testid="subagent-reject" disabled={decided.fetching} onClick={() => void decide({ id: s.approval!.id, decision: 'REJECT' })}>
                  Reject
                </button>
              </>
            )}
            {SUB_ACTIVE.has(s.status) && (
              <button className="link small" onClick={() => void cancel({ id: s.id })}>
                Cancel
              </button>
            )}
          </div>
          {decided.error && <ErrorBox error={decided.error} />}
          {s.error && (
            <div className="error small">
              {s.failureClass ? s.failureClass.toLowerCase() + ' failure: ' : ''}
              {s.error}
            </div>
          )}
          {s.result && <Markdown className="muted small subagent-result" text={s.result.length > 300 ? s.result.slice(0, 300) + '…' : s.result} />}
          {s.run && s.depth < 3 && <Children runId={s.run.id} active={SUB_ACTIVE.has(s.status)} />}
        </li>
      ))}
    </ul>
  );
}

/** A sub-agent's own sub-agents, loaded when opened, live while it has not ended. */
function Children({ runId, active }: { runId: string; active: boolean }) {
  const [open, setOpen] = useState(false);
  return (
    <details className="small" onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary className="muted">its sub-agents</summary>
      {open && <ChildrenList runId={runId} active={active} />}
    </details>
  );
}

function ChildrenList({ runId, active }: { runId: string; active: boolean }) {
  const [q, refetch] = useQuery({ query: RunSubagents, variables: { id: runId } });
  const subs = (q.data?.run?.subagents ?? []) as SubagentNode[];
  return (
    <>
      {active && <Follow runId={runId} afterSeq={0} onEvent={(e) => e.type.startsWith('subagent.') && refetch({ requestPolicy: 'network-only' })} />}
      {q.error && <ErrorBox error={q.error} />}
      {subs.length === 0 ? <p className="muted small">None.</p> : <SubagentTree nodes={subs} />}
    </>
  );
}
