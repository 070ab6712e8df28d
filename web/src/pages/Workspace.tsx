import { useState } from 'react';
import { Link } from 'react-router';
import { useMutation, useQuery } from 'urql';
import { Diff } from '../components/Diff';
import { Badge, Empty, ErrorBox, Loading } from '../components/ui';
import { dateTime } from '../lib/format';
import { CreateSnapshot, FileDiff, RestoreSnapshot, SnapshotDiff, WorkspaceFileContent, WorkspaceView } from '../lib/ops';

export function WorkspacePage() {
  const [q, refetch] = useQuery({ query: WorkspaceView, requestPolicy: 'cache-and-network' });
  const [selected, setSelected] = useState<string | null>(null);
  const [tab, setTab] = useState<'files' | 'snapshots'>('files');
  const ws = q.data?.workspace;
  const files = ws?.files ?? [];
  const file = files.find((f) => f.path === selected) ?? null;
  return (
    <div className="page" style={{ maxWidth: 1280 }}>
      <h1>Workspace</h1>
      <div className="tabs" role="tablist">
        <button className={tab === 'files' ? 'active' : ''} onClick={() => setTab('files')} role="tab">
          Files ({files.length})
        </button>
        <button className={tab === 'snapshots' ? 'active' : ''} onClick={() => setTab('snapshots')} role="tab">
          Snapshots ({ws?.snapshots.length ?? 0})
        </button>
      </div>
      <ErrorBox error={q.error} />
      {q.fetching && !ws && <Loading what="the workspace" />}
      {ws && tab === 'files' && (
        files.length === 0 ? (
          <Empty title="The workspace is empty.">
            Ask the agent in <Link to="/chat">Chat</Link> to write a file; it appears here with its history.
          </Empty>
        ) : (
          <div className="ws">
            <div className="card" style={{ padding: '0.5rem' }}>
              <FileTree paths={files.map((f) => f.path)} selected={selected} onSelect={setSelected} />
            </div>
            <div style={{ minWidth: 0 }}>{file ? <FileView key={file.path} file={file} /> : <p className="muted">Choose a file to see its content and history.</p>}</div>
          </div>
        )
      )}
      {ws && tab === 'snapshots' && <Snapshots snapshots={ws.snapshots} onChange={() => refetch({ requestPolicy: 'network-only' })} />}
    </div>
  );
}

/** The paths as a tree: folders first, then files, each folder indented. */
function FileTree({ paths, selected, onSelect }: { paths: string[]; selected: string | null; onSelect: (p: string) => void }) {
  const rows: { label: string; depth: number; path?: string }[] = [];
  const seen = new Set<string>();
  for (const p of [...paths].sort()) {
    const parts = p.split('/');
    for (let i = 0; i < parts.length - 1; i++) {
      const dir = parts.slice(0, i + 1).join('/');
      if (!seen.has(dir)) {
        seen.add(dir);
        rows.push({ label: `${parts[i]}/`, depth: i });
      }
    }
    rows.push({ label: parts[parts.length - 1], depth: parts.length - 1, path: p });
  }
  return (
    <ul className="files" aria-label="Files">
      {rows.map((r, i) => (
        <li key={i} style={{ paddingLeft: `${r.depth * 0.9}rem` }}>
          {r.path ? (
            <button className={r.path === selected ? 'active' : ''} onClick={() => onSelect(r.path!)}>
              {r.label}
            </button>
          ) : (
            <span className="muted small" style={{ padding: '0.35rem 0.5rem', display: 'block' }}>
              {r.label}
            </span>
          )}
        </li>
      ))}
    </ul>
  );
}

interface FileRow {
  path: string;
  size: number;
  version: number;
  updatedAt: string;
  versions: { version: number; deleted: boolean; size: number; runId?: string | null; createdAt: string }[];
}

function FileView({ file }: { file: FileRow }) {
  const [content] = useQuery({ query: WorkspaceFileContent, variables: { path: file.path }, requestPolicy: 'network-only' });
  const latest = file.versions[file.versions.length - 1]?.version ?? file.version;
  const [from, setFrom] = useState(Math.max(1, latest - 1));
  const [to, setTo] = useState(latest);
  const [diff] = useQuery({ query: FileDiff, variables: { path: file.path, from, to }, pause: file.versions.length < 2 });
  return (
    <div className="grid">
      <div className="card">
        <div className="row">
          <strong style={{ fontFamily: 'ui-monospace, monospace' }}>{file.path}</strong>
          <span className="muted small">
            v{file.version} · {file.size} bytes · {dateTime(file.updatedAt)}
          </span>
        </div>
        <ErrorBox error={content.error} />
        {content.data?.workspace.file?.content != null ? <pre data-testid="file-content">{content.data.workspace.file.content}</pre> : content.fetching ? <Loading /> : null}
      </div>
      <div className="card">
        <h3 style={{ marginTop: 0 }}>History</h3>
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th>Version</th>
                <th className="num">Size</th>
                <th>By run</th>
                <th>When</th>
              </tr>
            </thead>
            <tbody>
              {[...file.versions].reverse().map((v) => (
                <tr key={v.version}>
                  <td>
                    v{v.version} {v.deleted && <Badge value="deleted" />}
                  </td>
                  <td className="num">{v.size}</td>
                  <td>{v.runId ? <Link to={`/runs/${encodeURIComponent(v.runId)}`}>run</Link> : '—'}</td>
                  <td>{dateTime(v.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {file.versions.length >= 2 && (
          <>
            <div className="row" style={{ margin: '0.75rem 0' }}>
              Diff from
              <select aria-label="From version" value={from} onChange={(e) => setFrom(Number(e.target.value))}>
                {file.versions.map((v) => (
                  <option key={v.version} value={v.version}>
                    v{v.version}
                  </option>
                ))}
              </select>
              to
              <select aria-label="To version" value={to} onChange={(e) => setTo(Number(e.target.value))}>
                {file.versions.map((v) => (
                  <option key={v.version} value={v.version}>
                    v{v.version}
                  </option>
                ))}
              </select>
            </div>
            <ErrorBox error={diff.error} />
            {diff.data && <Diff text={diff.data.fileDiff} />}
          </>
        )}
      </div>
    </div>
  );
}

interface SnapshotRow {
  id: string;
  label?: string | null;
  committed: boolean;
  state: string;
  kind: string;
  createdAt: string;
  run?: { id: string } | null;
}

function Snapshots({ snapshots, onChange }: { snapshots: SnapshotRow[]; onChange: () => void }) {
  const [label, setLabel] = useState('');
  const [created, create] = useMutation(CreateSnapshot);
  const [restored, restore] = useMutation(RestoreSnapshot);
  const [from, setFrom] = useState<string>('');
  const [to, setTo] = useState<string>('');
  const [diff] = useQuery({ query: SnapshotDiff, variables: { from, to }, pause: !from || !to || from === to });
  const [done, setDone] = useState<string | null>(null);
  return (
    <div className="grid">
      <form
        className="card row"
        onSubmit={async (e) => {
          e.preventDefault();
          const r = await create({ label: label.trim() || null });
          if (r.data) {
            setLabel('');
            setDone('Snapshot taken.');
            onChange();
          }
        }}
      >
        <input aria-label="Snapshot label" placeholder="Label (optional)" value={label} onChange={(e) => setLabel(e.target.value)} maxLength={200} style={{ flex: 1 }} />
        <button className="primary" type="submit" disabled={created.fetching}>
          Take a snapshot
        </button>
      </form>
      <ErrorBox error={created.error ?? restored.error} />
      {done && <div className="success">{done}</div>}
      {snapshots.length === 0 ? (
        <Empty title="No snapshots yet.">A snapshot is taken before every run's first change; take one yourself before a risky change.</Empty>
      ) : (
        <div className="card table-wrap">
          <table>
            <thead>
              <tr>
                <th>Snapshot</th>
                <th>Kind</th>
                <th>State</th>
                <th>When</th>
                <th>Compare</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {snapshots.map((s) => (
                <tr key={s.id}>
                  <td>
                    {s.label || <span className="muted">unlabelled</span>}
                    {s.run && (
                      <div className="small">
                        <Link to={`/runs/${encodeURIComponent(s.run.id)}`}>before a run</Link>
                      </div>
                    )}
                  </td>
                  <td>{s.kind}</td>
                  <td>
                    <Badge value={s.state} />
                  </td>
                  <td>{dateTime(s.createdAt)}</td>
                  <td className="small">
                    <label className="check">
                      <input type="radio" name="from" checked={from === s.id} onChange={() => setFrom(s.id)} /> from
                    </label>
                    <label className="check">
                      <input type="radio" name="to" checked={to === s.id} onChange={() => setTo(s.id)} /> to
                    </label>
                  </td>
                  <td>
                    <button
                      className="small"
                      disabled={restored.fetching}
                      onClick={async () => {
                        if (!window.confirm('Make the workspace exactly what this snapshot recorded? The current state is snapshotted first, so you can undo it.')) return;
                        const r = await restore({ id: s.id });
                        if (r.data) {
                          setDone('Restored. The state before the restore was kept as a snapshot of kind “restore”.');
                          onChange();
                        }
                      }}
                    >
                      Restore
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {from && to && from !== to && (
        <div className="card">
          <h3 style={{ marginTop: 0 }}>Changes between the two snapshots</h3>
          <ErrorBox error={diff.error} />
          {diff.fetching && <Loading />}
          {diff.data && <Diff text={diff.data.snapshotDiff} />}
        </div>
      )}
    </div>
  );
}
