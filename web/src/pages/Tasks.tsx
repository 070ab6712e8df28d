import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { useMutation, useQuery } from 'urql';
import { Badge, Empty, ErrorBox, Loading } from '../components/ui';
import { dateTime, money } from '../lib/format';
import { CreateTask, RunTask, Tasks } from '../lib/ops';
import type { Complexity, TaskPriority, TaskType } from '../gql/graphql';

export function TasksPage() {
  const [q, refetch] = useQuery({ query: Tasks });
  const [creating, setCreating] = useState(false);
  const [run, runTask] = useMutation(RunTask);
  const navigate = useNavigate();
  const tasks = q.data?.tasks.edges.map((e) => e.node) ?? [];
  return (
    <div className="page">
      <div className="row">
        <h1 style={{ margin: 0 }}>Tasks</h1>
        <span className="spacer" />
        <button className="primary" onClick={() => setCreating(true)}>
          New task
        </button>
      </div>
      <p className="muted">A task is worked by the agent in a run of its own, until its acceptance criteria are met.</p>
      {creating && (
        <NewTask
          onDone={() => {
            setCreating(false);
            refetch({ requestPolicy: 'network-only' });
          }}
        />
      )}
      <ErrorBox error={q.error ?? run.error} />
      {q.fetching && !q.data && <Loading what="tasks" />}
      {q.data && tasks.length === 0 && !creating && <Empty title="No tasks yet.">Create one with “New task”; then run it and follow its run.</Empty>}
      <div className="grid">
        {tasks.map((t) => (
          <div className="card" key={t.id} data-testid="task">
            <div className="row">
              <strong>{t.title}</strong>
              <Badge value={t.status} />
              <span className="badge">{t.priority.toLowerCase()}</span>
              <span className="badge">{t.type.toLowerCase()}</span>
              <span className="badge">{t.complexity.toLowerCase()}</span>
              <span className="spacer" />
              <button
                className="small primary"
                disabled={t.status === 'DONE' || run.fetching}
                onClick={async () => {
                  const r = await runTask({ id: t.id });
                  if (r.data?.runTask) navigate(`/runs/${encodeURIComponent(r.data.runTask.id)}`);
                }}
              >
                Run
              </button>
            </div>
            {t.description && <p className="small">{t.description}</p>}
            <div className="muted small">
              {t.slug} · {dateTime(t.createdAt)} {t.tags.length > 0 && `· ${t.tags.join(', ')}`}
            </div>
            {t.runs.edges.length > 0 && (
              <div className="row small" style={{ marginTop: '0.5rem' }}>
                Runs:
                {t.runs.edges.map(({ node: r }) => (
                  <Link key={r.id} to={`/runs/${encodeURIComponent(r.id)}`}>
                    <Badge value={r.status} /> {dateTime(r.createdAt)} {money(r.costMicros)}
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

function NewTask({ onDone }: { onDone: () => void }) {
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [criteria, setCriteria] = useState('');
  const [priority, setPriority] = useState<TaskPriority>('MEDIUM');
  const [type, setType] = useState<TaskType>('TASK');
  const [complexity, setComplexity] = useState<Complexity>('STANDARD');
  const [tags, setTags] = useState('');
  const [res, create] = useMutation(CreateTask);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await create({
      input: {
        title,
        description: description || null,
        acceptanceCriteria: criteria || null,
        priority,
        type,
        complexity,
        tags: tags
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      },
    });
    if (r.data) onDone();
  };
  return (
    <form className="card" onSubmit={submit} style={{ display: 'flex', flexDirection: 'column', gap: '0.75rem', marginBottom: '1rem' }} aria-label="New task">
      <label>
        Title
        <input required value={title} onChange={(e) => setTitle(e.target.value)} />
      </label>
      <label>
        Description
        <textarea rows={3} value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>
      <label>
        Acceptance criteria
        <textarea rows={2} value={criteria} onChange={(e) => setCriteria(e.target.value)} />
      </label>
      <div className="form-grid">
        <label>
          Priority
          <select value={priority} onChange={(e) => setPriority(e.target.value as TaskPriority)}>
            {['LOW', 'MEDIUM', 'HIGH', 'CRITICAL'].map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Type
          <select value={type} onChange={(e) => setType(e.target.value as TaskType)}>
            {['TASK', 'FEATURE', 'BUG'].map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Complexity
          <select value={complexity} onChange={(e) => setComplexity(e.target.value as Complexity)}>
            {['SIMPLE', 'STANDARD', 'COMPLEX'].map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Tags (comma separated)
          <input value={tags} onChange={(e) => setTags(e.target.value)} />
        </label>
      </div>
      <ErrorBox error={res.error} />
      <div className="row end">
        <button type="button" onClick={onDone}>
          Cancel
        </button>
        <button className="primary" type="submit" disabled={res.fetching}>
          Create task
        </button>
      </div>
    </form>
  );
}
