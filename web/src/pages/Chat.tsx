import { useCallback, useEffect, useMemo, useReducer, useRef, useState, type DragEvent, type FormEvent, type KeyboardEvent } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { useClient, useMutation, useQuery, useSubscription } from 'urql';
import { Markdown } from '../components/Markdown';
import { Badge, Empty, ErrorBox, Json, Loading } from '../components/ui';
import { draftText, emptyEvents, eventsReducer, runEnded, type RunEventLike, type RunView } from '../lib/events';
import { errorText } from '../lib/errors';
import { dateTime, duration, money, time, tokens, uuidOf } from '../lib/format';
import {
  CancelRun,
  ConversationEvents,
  ConversationMessagesAfter,
  ConversationView,
  Conversations,
  CreateConversation,
  PauseRun,
  ResolveApproval,
  ResolveRollback,
  ResumeRun,
  RunEvents,
  SendMessage,
  StopRun,
  SetConversationVisibility,
  UpdateConversation,
} from '../lib/ops';
import type { BusyPolicy, ContextMode, ConversationVisibility, RunSummaryFragment } from '../gql/graphql';

const MODES: ContextMode[] = ['DEFAULT', 'BRAINSTORM', 'OUTPUT_REFINE', 'BROWSER', 'GAME'];
const MODELS = [
  'anthropic:claude-sonnet-4-5',
  'anthropic:claude-haiku-4-5',
  'anthropic:claude-opus-4-5',
  'openai:gpt-4o',
  'openai:gpt-4o-mini',
  'demo:demo',
];
const ACTIVE = new Set(['QUEUED', 'RUNNING', 'PAUSED', 'AWAITING_APPROVAL', 'WAITING']);

export function ChatPage() {
  const { id } = useParams();
  const [convs, refetchConvs] = useQuery({ query: Conversations });
  const [search, setSearch] = useState('');
  const [showList, setShowList] = useState(false);
  const [creating, setCreating] = useState(false);
  const [showActivity, setShowActivity] = useState(false);
  const list = useMemo(() => {
    const all = convs.data?.conversations.edges.map((e) => e.node) ?? [];
    const s = search.trim().toLowerCase();
    return s ? all.filter((c) => (c.title ?? 'Untitled').toLowerCase().includes(s) || c.model.toLowerCase().includes(s)) : all;
  }, [convs.data, search]);
  useEffect(() => setShowList(false), [id]);

  return (
    <div className={`chat${showList ? ' show-list' : ''}${showActivity ? ' show-activity' : ''}${creating || !id ? ' no-activity' : ''}`} data-testid="chat-page">
      <aside className="convlist" aria-label="Conversations">
        <div className="head">
          <input type="search" placeholder="Search" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Search conversations" />
          <button className="primary" onClick={() => setCreating(true)} title="New conversation">
            New
          </button>
        </div>
        <ErrorBox error={convs.error} />
        <ul>
          {list.map((c) => (
            <li key={c.id}>
              <Link to={`/chat/${encodeURIComponent(c.id)}`} className={c.id === id ? 'active' : ''}>
                {c.title || 'Untitled'}
                <div className="meta">
                  {c.visibility === 'TENANT' && (
                    <span className="shared-tag" title={c.viewerIsOwner ? 'You share it with your team' : 'A teammate shares it with the team'}>
                      Shared ·{' '}
                    </span>
                  )}
                  {c.model} · {dateTime(c.createdAt)}
                </div>
              </Link>
            </li>
          ))}
          {convs.data && list.length === 0 && (
            <li className="muted small" style={{ padding: '0.75rem' }}>
              {search ? 'No conversation matches.' : 'No conversations yet.'}
            </li>
          )}
        </ul>
      </aside>
      {creating || !id ? (
        <NewConversation
          first={!!convs.data && convs.data.conversations.edges.length === 0}
          onCancel={id ? () => setCreating(false) : undefined}
          onCreated={() => {
            setCreating(false);
            refetchConvs({ requestPolicy: 'network-only' });
          }}
          onShowList={() => setShowList(true)}
        />
      ) : (
        <Thread
          key={id}
          id={id}
          showActivity={showActivity}
          setShowActivity={setShowActivity}
          onShowList={() => setShowList(true)}
          onChanged={() => refetchConvs({ requestPolicy: 'network-only' })}
        />
      )}
    </div>
  );
}

function NewConversation({ first, onCancel, onCreated, onShowList }: { first: boolean; onCancel?: () => void; onCreated: () => void; onShowList: () => void }) {
  const [title, setTitle] = useState('');
  const [model, setModel] = useState('');
  const [mode, setMode] = useState<ContextMode>('DEFAULT');
  const [agentic, setAgentic] = useState(true);
  const [res, create] = useMutation(CreateConversation);
  const navigate = useNavigate();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await create({ input: { title: title.trim() || null, model: model.trim() || null, mode, agentic } });
    const c = r.data?.createConversation;
    if (c) {
      onCreated();
      navigate(`/chat/${encodeURIComponent(c.id)}`);
    }
  };
  return (
    <section className="thread">
      <div className="thread-head">
        <button className="small mobile-only" onClick={onShowList} aria-label="Conversations">
          Chats
        </button>
        <span className="title">New conversation</span>
      </div>
      <div className="messages">
        <div className="msg">
          {first && (
            <Empty title="Start your first conversation">
              Ask the agent anything. It can read and write files in your workspace; changes that need your say show up as cards to approve.
            </Empty>
          )}
          <form className="card" onSubmit={submit} aria-label="New conversation" style={{ display: 'flex', flexDirection: 'column', gap: '0.8rem', marginTop: '1rem' }}>
            <label>
              Title
              <input name="title" value={title} onChange={(e) => setTitle(e.target.value)} placeholder="What is it about?" maxLength={200} />
            </label>
            <div className="form-grid">
              <label>
                Model
                <input name="model" list="models" value={model} onChange={(e) => setModel(e.target.value)} placeholder="the server's default" />
                <datalist id="models">
                  {MODELS.map((m) => (
                    <option key={m} value={m} />
                  ))}
                </datalist>
              </label>
              <label>
                Context mode
                <select name="mode" value={mode} onChange={(e) => setMode(e.target.value as ContextMode)}>
                  {MODES.map((m) => (
                    <option key={m} value={m}>
                      {m.replace('_', ' ').toLowerCase()}
                    </option>
                  ))}
                </select>
              </label>
            </div>
            <label className="check">
              <input type="checkbox" checked={agentic} onChange={(e) => setAgentic(e.target.checked)} /> Tools (workspace files, memory)
            </label>
            <ErrorBox error={res.error} />
            <div className="row end">
              {onCancel && (
                <button type="button" onClick={onCancel}>
                  Cancel
                </button>
              )}
              <button className="primary" type="submit" disabled={res.fetching}>
                Start conversation
              </button>
            </div>
          </form>
        </div>
      </div>
    </section>
  );
}

/** Live events of every run of the conversation (token deltas from a run's first one on). */
function ConversationStream({ id, onEvent }: { id: string; onEvent: (e: RunEventLike) => void }) {
  useSubscription({ query: ConversationEvents, variables: { id } }, (_prev: unknown, data) => {
    onEvent(data.conversationEvents as RunEventLike);
    return data;
  });
  return null;
}

/** Subscribes to one run's events (stored ones after afterSeq, then live) while mounted. */
function RunStream({ runId, afterSeq, onEvent }: { runId: string; afterSeq: number; onEvent: (e: RunEventLike) => void }) {
  const [start] = useState(afterSeq); // resubscribing with a moving afterSeq would restart the stream
  const [res] = useSubscription({ query: RunEvents, variables: { runId, afterSeq: start } }, (_prev: unknown, data) => {
    onEvent(data.runEvents as RunEventLike);
    return data;
  });
  void res;
  return null;
}

interface Attachment {
  filename: string;
  mediaType: string;
  dataBase64: string;
  size: number;
}

const TEXT_EXT: Record<string, string> = {
  md: 'text/markdown',
  txt: 'text/plain',
  json: 'application/json',
  csv: 'text/csv',
  ts: 'text/plain',
  tsx: 'text/plain',
  js: 'text/plain',
  go: 'text/plain',
  py: 'text/plain',
  yaml: 'text/plain',
  yml: 'text/plain',
  html: 'text/html',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
};
const MAX_FILES = 5;
const MAX_FILE = 5 * 1024 * 1024;
const MAX_TOTAL = 10 * 1024 * 1024;

function readFile(f: File): Promise<Attachment> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => {
      const url = String(r.result);
      const ext = f.name.split('.').pop()?.toLowerCase() ?? '';
      const mediaType = f.type || TEXT_EXT[ext] || 'text/plain';
      resolve({ filename: f.name, mediaType, dataBase64: url.slice(url.indexOf(',') + 1), size: f.size });
    };
    r.onerror = () => reject(r.error);
    r.readAsDataURL(f);
  });
}

function isActive(status: string | undefined) {
  return !!status && ACTIVE.has(status);
}

type Part = { type: string; text?: string; id?: string; name?: string; input?: unknown; media_type?: string };

function partsOf(parts: unknown): Part[] {
  if (Array.isArray(parts)) return parts as Part[];
  if (typeof parts === 'string') {
    try {
      const p = JSON.parse(parts);
      return Array.isArray(p) ? p : [];
    } catch {
      return [];
    }
  }
  return [];
}

/** The names of the files a message carried: text and PDF attachments, and images. */
function attachmentNames(parts: Part[]): string[] {
  const out: string[] = [];
  for (const p of parts) {
    if (p.type === 'image') out.push(`image (${p.media_type ?? 'image'})`);
    const m = p.type === 'text' && p.text ? /^<attachment filename="((?:[^"\\]|\\.)*)"/.exec(p.text) : null;
    if (m) out.push(m[1].replace(/\\(.)/g, '$1'));
  }
  return out;
}

function sameJSON(a: unknown, b: unknown): boolean {
  const norm = (v: unknown) => {
    if (typeof v === 'string') {
      try {
        return JSON.stringify(JSON.parse(v));
      } catch {
        return v;
      }
    }
    return JSON.stringify(v);
  };
  return norm(a) === norm(b);
}

function Thread({
  id,
  showActivity,
  setShowActivity,
  onShowList,
  onChanged,
}: {
  id: string;
  showActivity: boolean;
  setShowActivity: (v: boolean) => void;
  onShowList: () => void;
  onChanged: () => void;
}) {
  const [q, refetch] = useQuery({ query: ConversationView, variables: { id } });
  const [events, dispatch] = useReducer(eventsReducer, emptyEvents);
  const [extraRuns, setExtraRuns] = useState<RunSummaryFragment[]>([]);
  const refetchTimer = useRef<number | null>(null);
  const scrollRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const conv = q.data?.conversation;

  const refresh = useCallback(() => {
    if (refetchTimer.current !== null) return;
    refetchTimer.current = window.setTimeout(() => {
      refetchTimer.current = null;
      refetch({ requestPolicy: 'network-only' });
    }, 120);
  }, [refetch]);
  useEffect(() => () => {
    if (refetchTimer.current !== null) window.clearTimeout(refetchTimer.current);
  }, []);

  const known = useRef(new Set<string>());
  const onEvent = useCallback(
    (e: RunEventLike) => {
      dispatch({ type: 'event', event: e });
      if ((e.seq > 0 && e.type !== 'usage.recorded' && e.type !== 'context.window.applied') || !known.current.has(e.runId)) refresh();
    },
    [refresh],
  );

  // Runs newest first: the query's, plus ones just sent that it does not list yet.
  const runs = useMemo(() => {
    const listed = conv?.runs.edges.map((e) => e.node) ?? [];
    const ids = new Set(listed.map((r) => r.id));
    return [...extraRuns.filter((r) => !ids.has(r.id)), ...listed];
  }, [conv, extraRuns]);
  const runById = useMemo(() => new Map(runs.map((r) => [r.id, r])), [runs]);
  known.current = new Set(runs.map((r) => r.id));
  const activeRun = runs.find((r) => isActive(r.status) && !runEnded(events.runs[r.id]));
  const latest = runs[0];
  // Follow every run that has not ended, and the latest one (its events fill the activity panel).
  const streamed = useMemo(() => {
    const s = new Set<string>();
    for (const r of runs) if (isActive(r.status)) s.add(r.id);
    if (latest) s.add(latest.id);
    return [...s];
  }, [runs, latest]);

  // A conversation longer than a page: the later pages, fetched after the first.
  // (The API pages messages oldest first.)
  const client = useClient();
  const [later, setLater] = useState<NonNullable<typeof conv>['messages']['edges'][number]['node'][]>([]);
  const firstPage = conv?.messages;
  useEffect(() => {
    if (!firstPage?.pageInfo.hasNextPage) {
      setLater([]);
      return;
    }
    let stop = false;
    (async () => {
      const acc: typeof later = [];
      let after = firstPage.pageInfo.endCursor ?? null;
      while (!stop && after) {
        const r = await client.query(ConversationMessagesAfter, { id, after }, { requestPolicy: 'network-only' }).toPromise();
        const page = r.data?.conversation?.messages;
        if (!page) break;
        acc.push(...page.edges.map((e) => e.node));
        after = page.pageInfo.hasNextPage ? (page.pageInfo.endCursor ?? null) : null;
      }
      if (!stop) setLater(acc);
    })();
    return () => {
      stop = true;
    };
  }, [client, id, firstPage]);

  // Keep the view at the bottom while new text arrives, unless the reader scrolled up.
  useEffect(() => {
    const el = scrollRef.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });

  if (q.error && !conv) {
    return (
      <section className="thread">
        <div className="messages">
          <ErrorBox error={q.error} />
        </div>
      </section>
    );
  }
  if (!conv) {
    return (
      <section className="thread">
        <div className="messages">{q.fetching ? <Loading what="the conversation" /> : <Empty title="This conversation does not exist." />}</div>
      </section>
    );
  }

  const persisted = [...conv.messages.edges.map((e) => e.node), ...later];
  const persistedIds = new Set(persisted.map((m) => uuidOf(m.id)));
  // Replies seen as events but not yet in the stored list, and drafts still streaming.
  const live: { key: string; runId: string; text: string; streaming: boolean; gap: boolean; stopped: boolean }[] = [];
  for (const r of [...runs].reverse()) {
    const v: RunView | undefined = events.runs[r.id];
    if (!v) continue;
    for (const c of Object.values(v.completed).sort((a, b) => a.callIndex - b.callIndex)) {
      if (!persistedIds.has(uuidOf(c.messageId))) live.push({ key: `${r.id}:c${c.callIndex}`, runId: r.id, text: c.content, streaming: false, gap: false, stopped: false });
    }
    const ended = runEnded(v) || !isActive(r.status);
    for (const d of Object.values(v.drafts).sort((a, b) => a.callIndex - b.callIndex)) {
      const { text, gap } = draftText(d);
      live.push({ key: `${r.id}:d${d.callIndex}`, runId: r.id, text, streaming: !ended, gap, stopped: ended });
    }
  }
  const pending = runs.flatMap((r) => r.approvals.filter((a) => a.status === 'PENDING').map((a) => ({ run: r, approval: a })));
  const toolCallsUsed = new Set<string>();

  return (
    <>
      <section
        className="thread"
        aria-label="Conversation"
        data-conversation-id={conv.id}
      >
        <ThreadHead conv={conv} onShowList={onShowList} onChanged={onChanged} onActivity={() => setShowActivity(!showActivity)} />
        <div
          className="messages"
          ref={scrollRef}
          onScroll={(e) => {
            const el = e.currentTarget;
            stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
          }}
          data-testid="messages"
        >
          <ConversationStream id={id} onEvent={onEvent} />
          {streamed.map((rid) => (
            <RunStream key={rid} runId={rid} afterSeq={events.runs[rid]?.lastSeq ?? 0} onEvent={onEvent} />
          ))}
          {persisted.length === 0 && live.length === 0 && (
            <Empty title="No messages yet">Write below to start. Drop files on this area to attach them.</Empty>
          )}
          {persisted.map((m) => {
            if (m.role === 'TOOL' || m.role === 'SYSTEM') return null;
            const run = m.run ? runById.get(m.run.id) : undefined;
            const parts = partsOf(m.parts);
            const toolUses = parts.filter((p) => p.type === 'tool_use');
            const files = attachmentNames(parts);
            return (
              <div key={m.id} className={`msg ${m.role === 'USER' ? 'user' : 'assistant'}`} data-role={m.role} data-testid="message">
                <div className="who">{m.role === 'USER' ? 'You' : 'Agent'}</div>
                {m.content && (m.role === 'USER' ? <div className="bubble">{m.content}</div> : <Markdown className="bubble" text={m.content} />)}
                {files.length > 0 && (
                  <div className="attach-chips">
                    {files.map((f, i) => (
                      <span className="chip" key={i} data-testid="attachment">
                        {f}
                      </span>
                    ))}
                  </div>
                )}
                {toolUses.map((u, i) => {
                  const tc = run?.toolCalls.find((c) => !toolCallsUsed.has(c.id) && c.name === u.name && sameJSON(c.arguments, u.input));
                  if (tc) toolCallsUsed.add(tc.id);
                  return <ToolCard key={u.id ?? i} name={u.name ?? '?'} args={u.input} call={tc} />;
                })}
              </div>
            );
          })}
          {live.map((l) => (
            <div key={l.key} className="msg assistant" data-role="ASSISTANT" data-testid={l.streaming ? 'streaming' : 'message'}>
              <div className="who">Agent</div>
              {l.gap && <span className="gap">…</span>}
              <Markdown className={`bubble${l.streaming ? ' cursor' : ''}`} text={l.text} />
              {l.stopped && <span className="muted small">Stopped before the reply was complete.</span>}
            </div>
          ))}
          {runs
            .filter((r) => !isActive(r.status) && r.status !== 'COMPLETED' && (r.error || r.terminationReason))
            .slice(0, 1)
            .filter((r) => r === latest)
            .map((r) => (
              <div key={r.id} className="msg">
                <div className={r.status === 'CANCELLED' ? 'notice' : 'error'}>
                  Run {r.status.toLowerCase().replace('_', ' ')}
                  {r.terminationReason ? ` (${r.terminationReason.replace(/_/g, ' ')})` : ''}
                  {r.error ? `: ${r.error}` : '.'} <Link to={`/runs/${encodeURIComponent(r.id)}`}>Details</Link>
                </div>
              </div>
            ))}
          {pending.map(({ run, approval }) =>
            approval.kind === 'rollback' ? (
              <RollbackCard key={approval.id} approval={approval} events={events.runs[run.id]} onDone={refresh} />
            ) : (
              <ApprovalCard key={approval.id} approval={approval} onDone={refresh} />
            ),
          )}
        </div>
        <Composer
          conversationId={conv.id}
          activeRun={activeRun}
          onSent={(run) => {
            setExtraRuns((xs) => [run, ...xs]);
            stick.current = true;
            refresh();
          }}
          onControl={refresh}
        />
      </section>
      <ActivityPanel run={latest} view={latest ? events.runs[latest.id] : undefined} model={conv.model} onClose={() => setShowActivity(false)} />
    </>
  );
}

function ThreadHead({
  conv,
  onShowList,
  onChanged,
  onActivity,
}: {
  conv: {
    id: string;
    title?: string | null;
    mode: ContextMode;
    model: string;
    agentic: boolean;
    visibility: ConversationVisibility;
    viewerIsOwner: boolean;
  };
  onShowList: () => void;
  onChanged: () => void;
  onActivity: () => void;
}) {
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(conv.title ?? '');
  const [res, update] = useMutation(UpdateConversation);
  const [shareRes, share] = useMutation(SetConversationVisibility);
  const setVisibility = async (visibility: ConversationVisibility) => {
    const r = await share({ id: conv.id, visibility });
    if (!r.error) onChanged();
  };
  const save = async (input: { title?: string; mode?: ContextMode; agentic?: boolean }) => {
    const r = await update({ id: conv.id, input });
    if (!r.error) onChanged();
    setEditing(false);
  };
  return (
    <div className="thread-head">
      <button className="small mobile-only" onClick={onShowList} aria-label="Conversations">
        Chats
      </button>
      {editing ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void save({ title });
          }}
          className="row"
        >
          <input aria-label="Title" value={title} autoFocus onChange={(e) => setTitle(e.target.value)} maxLength={200} />
          <button className="small primary" type="submit">
            Save
          </button>
          <button className="small" type="button" onClick={() => setEditing(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <>
          <span className="title" title={conv.title ?? ''}>
            {conv.title || 'Untitled'}
          </span>
          <button className="small link" onClick={() => setEditing(true)} aria-label="Rename">
            Rename
          </button>
        </>
      )}
      <span className="spacer" />
      {conv.viewerIsOwner ? (
        <select
          aria-label="Who sees this conversation"
          data-testid="share-toggle"
          value={conv.visibility}
          disabled={shareRes.fetching}
          onChange={(e) => void setVisibility(e.target.value as ConversationVisibility)}
          className="small"
          title="Private: only you. Shared with team: every member reads it; members may write in it."
        >
          <option value="PRIVATE">Private</option>
          <option value="TENANT">Shared with team</option>
        </select>
      ) : (
        <span className="muted small" data-testid="shared-by-teammate">
          Shared by a teammate
        </span>
      )}
      <select aria-label="Context mode" value={conv.mode} onChange={(e) => void save({ mode: e.target.value as ContextMode })} className="small">
        {MODES.map((m) => (
          <option key={m} value={m}>
            {m.replace('_', ' ').toLowerCase()}
          </option>
        ))}
      </select>
      <button className="small activity-toggle" onClick={onActivity} aria-label="Activity">
        Activity
      </button>
      {res.error && <span className="field-error">{errorText(res.error)}</span>}
      {shareRes.error && <span className="field-error">{errorText(shareRes.error)}</span>}
    </div>
  );
}

function ToolCard({ name, args, call }: { name: string; args: unknown; call?: RunSummaryFragment['toolCalls'][number] }) {
  const status = call?.status ?? 'PENDING';
  return (
    <details className="tool" data-testid="tool-card" data-tool={name}>
      <summary>
        <span className="tool-icon" aria-hidden="true">⚙</span>
        <span className="name">{name}</span>
        <Badge value={status} />
        {call && <span className="muted small">risk {call.risk}</span>}
        <span className="spacer" />
        <span className="muted small">details</span>
      </summary>
      <div className="body">
        <div className="muted small">Arguments</div>
        <Json value={call?.arguments ?? args} />
        {call?.output && (
          <>
            <div className="muted small">Output</div>
            <pre>{call.output}</pre>
          </>
        )}
        {call?.error && (
          <>
            <div className="muted small">Error</div>
            <pre className="error">{call.error}</pre>
          </>
        )}
      </div>
    </details>
  );
}

function ApprovalCard({ approval, onDone }: { approval: RunSummaryFragment['approvals'][number]; onDone: () => void }) {
  const [res, resolve] = useMutation(ResolveApproval);
  const [note, setNote] = useState('');
  const decide = async (decision: 'APPROVE' | 'REJECT') => {
    const r = await resolve({ id: approval.id, decision, note: note.trim() || null });
    if (!r.error) onDone();
  };
  const tc = approval.toolCall;
  return (
    <div className="msg">
      <div className="approval" data-testid="approval-card" role="group" aria-label="Approval">
        <strong>
          {approval.kind === 'tool_call' && tc ? (
            <>
              The agent wants to run <code>{tc.name}</code> (risk {tc.risk})
            </>
          ) : (
            approval.question || `The run asks: ${approval.kind.replace('_', ' ')}`
          )}
        </strong>
        {tc && <Json value={tc.arguments} />}
        <input placeholder="Note for the agent (optional)" value={note} onChange={(e) => setNote(e.target.value)} aria-label="Note" />
        <div className="row">
          <button className="primary" onClick={() => decide('APPROVE')} disabled={res.fetching}>
            {approval.kind === 'continue' ? 'Continue' : 'Approve'}
          </button>
          <button className="danger" onClick={() => decide('REJECT')} disabled={res.fetching}>
            {approval.kind === 'continue' ? 'Stop here' : 'Reject'}
          </button>
          <span className="muted small">Expires {dateTime(approval.expiresAt)}</span>
        </div>
        <ErrorBox error={res.error} />
      </div>
    </div>
  );
}

function RollbackCard({ approval, events, onDone }: { approval: RunSummaryFragment['approvals'][number]; events?: RunView; onDone: () => void }) {
  const [res, resolve] = useMutation(ResolveRollback);
  const requested = events?.events.find((e) => e.type === 'approval.requested' && (e.data as { kind?: string })?.kind === 'rollback');
  const paths = ((requested?.data as { paths?: string[] } | undefined)?.paths ?? []) as string[];
  const choose = async (choice: 'ROLLBACK' | 'KEEP' | 'CONTINUE') => {
    const r = await resolve({ id: approval.id, choice });
    if (!r.error) onDone();
  };
  return (
    <div className="msg">
      <div className="approval rollback" data-testid="rollback-card" role="group" aria-label="Rollback">
        <strong>The run stopped after changing files. What should happen to its changes?</strong>
        {approval.question && <span>{approval.question}</span>}
        {paths.length > 0 && (
          <div className="attach-chips">
            {paths.map((p) => (
              <span key={p} className="chip">
                {p}
              </span>
            ))}
          </div>
        )}
        <div className="row">
          <button className="danger" onClick={() => choose('ROLLBACK')} disabled={res.fetching}>
            Roll back
          </button>
          <button onClick={() => choose('KEEP')} disabled={res.fetching}>
            Keep changes
          </button>
          <button onClick={() => choose('CONTINUE')} disabled={res.fetching}>
            Continue the run
          </button>
        </div>
        <ErrorBox error={res.error} />
      </div>
    </div>
  );
}

function Composer({
  conversationId,
  activeRun,
  onSent,
  onControl,
}: {
  conversationId: string;
  activeRun?: RunSummaryFragment;
  onSent: (run: RunSummaryFragment) => void;
  onControl: () => void;
}) {
  const [text, setText] = useState('');
  const [files, setFiles] = useState<Attachment[]>([]);
  const [ifBusy, setIfBusy] = useState<BusyPolicy>('ENQUEUE');
  const [dragging, setDragging] = useState(false);
  const [fileError, setFileError] = useState<string | null>(null);
  const [res, send] = useMutation(SendMessage);
  const [ctl, setCtl] = useState<string | null>(null);
  const [ctlError, setCtlError] = useState<string | null>(null);
  const [, cancel] = useMutation(CancelRun);
  const [, pause] = useMutation(PauseRun);
  const [, resume] = useMutation(ResumeRun);
  const [, stop] = useMutation(StopRun);
  const inputRef = useRef<HTMLInputElement>(null);

  const addFiles = async (list: FileList | File[]) => {
    setFileError(null);
    const next = [...files];
    for (const f of Array.from(list)) {
      if (next.length >= MAX_FILES) {
        setFileError(`At most ${MAX_FILES} files per message.`);
        break;
      }
      if (f.size > MAX_FILE) {
        setFileError(`${f.name} is larger than 5 MiB.`);
        continue;
      }
      next.push(await readFile(f));
    }
    if (next.reduce((s, f) => s + f.size, 0) > MAX_TOTAL) {
      setFileError('The files are larger than 10 MiB together.');
      return;
    }
    setFiles(next);
  };

  const submit = async (e?: FormEvent) => {
    e?.preventDefault();
    if (!text.trim() && files.length === 0) return;
    const r = await send({
      input: {
        conversationId,
        content: text,
        idempotencyKey: crypto.randomUUID(),
        ifBusy: activeRun ? ifBusy : null,
        attachments: files.length ? files.map(({ filename, mediaType, dataBase64 }) => ({ filename, mediaType, dataBase64 })) : null,
      },
    });
    if (r.data?.sendMessage) {
      setText('');
      setFiles([]);
      onSent(r.data.sendMessage.run);
    }
  };

  const control = async (what: 'cancel' | 'pause' | 'resume' | 'stop') => {
    if (!activeRun) return;
    setCtl(what);
    setCtlError(null);
    const fn = { cancel, pause, resume, stop }[what];
    const r = await fn({ id: activeRun.id });
    setCtl(null);
    if (r.error) setCtlError(errorText(r.error));
    onControl();
  };

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    if (e.dataTransfer.files.length) void addFiles(e.dataTransfer.files);
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void submit();
    }
  };

  return (
    <div
      className="composer"
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={onDrop}
    >
      {dragging && <div className="dropzone">Drop files to attach them</div>}
      {activeRun && (
        <div className="runbar" data-testid="run-controls">
          <Badge value={activeRun.status} />
          <span className="muted">
            {activeRun.status === 'QUEUED' ? 'Waiting for a worker…' : activeRun.status === 'AWAITING_APPROVAL' ? 'Waiting for your decision' : activeRun.status === 'WAITING' ? 'Waiting for its sub-agents' : `Turn ${activeRun.turns}`}
          </span>
          <span className="spacer" />
          {activeRun.status === 'PAUSED' ? (
            <button className="small" onClick={() => control('resume')} disabled={!!ctl}>
              Resume
            </button>
          ) : (
            <button className="small" onClick={() => control('pause')} disabled={!!ctl || activeRun.status !== 'RUNNING'}>
              Pause
            </button>
          )}
          <button className="small" onClick={() => control('stop')} disabled={!!ctl} title="Finish the current step, then stop">
            Stop
          </button>
          <button className="small danger" onClick={() => control('cancel')} disabled={!!ctl} title="Stop now">
            {ctl === 'cancel' ? <span className="spinner" /> : 'Cancel'}
          </button>
        </div>
      )}
      <form onSubmit={submit} aria-label="Send a message">
        {ctlError && <div className="error">{ctlError}</div>}
        <textarea
          name="message"
          placeholder="Message the agent (Enter to send, Shift+Enter for a new line)"
          value={text}
          onChange={(e) => setText(e.target.value)}
          onKeyDown={onKey}
          rows={2}
          aria-label="Message"
        />
        {files.length > 0 && (
          <div className="attach-chips">
            {files.map((f, i) => (
              <span className="chip" key={i}>
                {f.filename} <span className="muted">{Math.ceil(f.size / 1024)} KB</span>
                <button type="button" className="link small" aria-label={`Remove ${f.filename}`} onClick={() => setFiles(files.filter((_, j) => j !== i))}>
                  ✕
                </button>
              </span>
            ))}
          </div>
        )}
        {fileError && <div className="field-error">{fileError}</div>}
        <ErrorBox error={res.error} />
        <div className="controls">
          <button type="button" className="small" onClick={() => inputRef.current?.click()} title="Attach text, PDF or image files">
            + Attach
          </button>
          <input
            ref={inputRef}
            type="file"
            multiple
            hidden
            accept=".txt,.md,.json,.csv,.pdf,.png,.jpg,.jpeg,.gif,.webp,text/*"
            onChange={(e) => {
              if (e.target.files) void addFiles(e.target.files);
              e.target.value = '';
            }}
          />
          {activeRun && (
            <label className="row small" style={{ flexDirection: 'row', alignItems: 'center' }}>
              <span className="hide-phone">While busy</span>
              <select value={ifBusy} onChange={(e) => setIfBusy(e.target.value as BusyPolicy)} aria-label="While busy">
                <option value="ENQUEUE">queue after this run</option>
                <option value="INTERRUPT">interrupt this run</option>
                <option value="REJECT">don't send</option>
              </select>
            </label>
          )}
          <span className="spacer" />
          <button className="primary" type="submit" disabled={res.fetching || (!text.trim() && files.length === 0)}>
            {res.fetching ? <span className="spinner" /> : 'Send'}
          </button>
        </div>
      </form>
    </div>
  );
}

const BAD = /failed|cancelled|timed_out|backtracked|exceeded/;

function ActivityPanel({ run, view, model, onClose }: { run?: RunSummaryFragment; view?: RunView; model: string; onClose: () => void }) {
  return (
    <aside className="activity" aria-label="Activity" data-testid="activity">
      <div className="row">
        <strong>Activity</strong>
        <span className="spacer" />
        {run && <Link to={`/runs/${encodeURIComponent(run.id)}`}>Run page</Link>}
        <button className="small mobile-only" onClick={onClose} aria-label="Close activity">
          ✕
        </button>
      </div>
      {!run ? (
        <p className="muted small">The events of the agent's runs show here as they happen: queued, started, tool calls, approvals, usage.</p>
      ) : (
        <>
          <div className="row">
            <Badge value={run.status} />
            <span className="muted small">{duration(run.startedAt ?? run.createdAt, run.finishedAt)}</span>
          </div>
          {model && <div className="muted small">Model: {model}</div>}
          <div className="stats">
            <div>
              <span className="muted small">Turns</span>
              <b>{run.turns}</b>
            </div>
            <div>
              <span className="muted small">Cost</span>
              <b>{money(run.costMicros)}</b>
            </div>
            <div>
              <span className="muted small">Input tokens</span>
              <b>{tokens(run.inputTokens)}</b>
            </div>
            <div>
              <span className="muted small">Output tokens</span>
              <b>{tokens(run.outputTokens)}</b>
            </div>
          </div>
          {run.failureClass && (
            <div className="error small">
              {run.failureClass}: {run.error ?? run.terminationReason}
            </div>
          )}
          <ol className="timeline" data-testid="timeline">
            {(view?.events ?? []).map((e) => (
              <li key={e.seq} title={JSON.stringify(e.data)}>
                <span className="seq">{e.seq}</span>
                <span className="t">{time(e.timestamp)}</span>
                <span className={`type${BAD.test(e.type) ? ' bad' : ''}`}>{e.type}</span>
              </li>
            ))}
          </ol>
        </>
      )}
    </aside>
  );
}
