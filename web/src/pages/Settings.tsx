import { useEffect, useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { Badge, Empty, ErrorBox, Loading } from '../components/ui';
import { session } from '../lib/client';
import { dateTime } from '../lib/format';
import { AcceptInvitation, AddMember, ApiKeys, Members as MembersQuery, CreateApiKey, RevokeApiKey, Settings, UpdateSettings } from '../lib/ops';
import type { AgentSettingsInput, ContextStrategy, Personality, Role, Verbosity } from '../gql/graphql';

/** The server's ranges and defaults (internal/settings), mirrored so the form refuses what the server would. */
export const RANGES = {
  approvalThreshold: { min: 0, max: 100, def: 50, label: 'Approval threshold', hint: 'risk above which a tool call needs your approval when auto-execute is on' },
  maxTokensPerTask: { min: 1024, max: 131072, def: 4096, label: 'Max output tokens per run', hint: '' },
  maxRetries: { min: 0, max: 10, def: 3, label: 'Retries', hint: 'after the first attempt, for transient failures' },
  timeoutSeconds: { min: 30, max: 3600, def: 300, label: 'Timeout (seconds)', hint: 'bounds one attempt of a chat turn' },
  teamMaxIterations: { min: 1, max: 10, def: 3, label: 'Team: iterations', hint: 'executor and reviewer rounds of a team run' },
  teamTimeoutMinutes: { min: 1, max: 240, def: 30, label: 'Team: timeout (minutes)', hint: 'wall-clock time of a team run' },
  teamTokenBudget: { min: 1000, max: 10000000, def: 500000, label: 'Team: token budget', hint: 'input and output tokens of every phase together' },
  teamArchitectMaxTurns: { min: 1, max: 100, def: 15, label: 'Team: architect turns', hint: '' },
  teamExecutorMaxTurns: { min: 1, max: 100, def: 30, label: 'Team: executor turns', hint: '' },
  teamReviewerMaxTurns: { min: 1, max: 100, def: 15, label: 'Team: reviewer turns', hint: '' },
} as const;
type NumField = keyof typeof RANGES;

export function validateSettings(v: Record<NumField, string>): Partial<Record<NumField, string>> {
  const errs: Partial<Record<NumField, string>> = {};
  for (const k of Object.keys(RANGES) as NumField[]) {
    const r = RANGES[k];
    const n = Number(v[k]);
    if (v[k].trim() === '' || !Number.isInteger(n)) errs[k] = 'Enter a whole number.';
    else if (n < r.min || n > r.max) errs[k] = `Must be between ${r.min.toLocaleString('en-US')} and ${r.max.toLocaleString('en-US')}.`;
  }
  return errs;
}

export function SettingsPage() {
  const [tab, setTab] = useState<'agent' | 'keys' | 'members'>('agent');
  const role = session.viewer?.role;
  const admin = role === 'OWNER' || role === 'ADMIN';
  return (
    <div className="page">
      <h1>Settings</h1>
      <div className="tabs" role="tablist">
        <button role="tab" className={tab === 'agent' ? 'active' : ''} onClick={() => setTab('agent')}>
          Agent
        </button>
        <button role="tab" className={tab === 'keys' ? 'active' : ''} onClick={() => setTab('keys')}>
          API keys
        </button>
        <button role="tab" className={tab === 'members' ? 'active' : ''} onClick={() => setTab('members')}>
          Members
        </button>
      </div>
      {tab === 'agent' && <AgentSettings />}
      {tab === 'keys' && (admin ? <Keys /> : <div className="notice">Only owners and admins manage API keys.</div>)}
      {tab === 'members' && (
        <>
          {admin ? <Members /> : <div className="notice">Only owners and admins add members.</div>}
          <AcceptInvite />
        </>
      )}
    </div>
  );
}

function AgentSettings() {
  const [q] = useQuery({ query: Settings });
  const [res, update] = useMutation(UpdateSettings);
  const s = q.data?.agentSettings;
  const [personality, setPersonality] = useState<Personality>('BALANCED');
  const [verbosity, setVerbosity] = useState<Verbosity>('NORMAL');
  const [strategy, setStrategy] = useState<ContextStrategy>('PRESERVE');
  const [autoExecute, setAutoExecute] = useState(false);
  const [approveSubagents, setApproveSubagents] = useState(false);
  const [nums, setNums] = useState<Record<NumField, string>>(
    Object.fromEntries((Object.keys(RANGES) as NumField[]).map((k) => [k, String(RANGES[k].def)])) as Record<NumField, string>,
  );
  const [errs, setErrs] = useState<Partial<Record<NumField, string>>>({});
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    if (!s) return;
    setPersonality(s.personality);
    setVerbosity(s.verbosity);
    setStrategy(s.contextStrategy);
    setAutoExecute(s.autoExecute);
    setApproveSubagents(s.subagentApproval === 'REQUIRED');
    setNums({
      approvalThreshold: String(s.approvalThreshold),
      maxTokensPerTask: String(s.maxTokensPerTask),
      maxRetries: String(s.maxRetries),
      timeoutSeconds: String(s.timeoutSeconds),
      teamMaxIterations: String(s.team.maxIterations),
      teamTimeoutMinutes: String(s.team.timeoutMinutes),
      teamTokenBudget: String(s.team.tokenBudget),
      teamArchitectMaxTurns: String(s.team.architectMaxTurns),
      teamExecutorMaxTurns: String(s.team.executorMaxTurns),
      teamReviewerMaxTurns: String(s.team.reviewerMaxTurns),
    });
  }, [s]);
  if (q.error) return <ErrorBox error={q.error} />;
  if (!s) return <Loading what="settings" />;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    const v = validateSettings(nums);
    setErrs(v);
    if (Object.keys(v).length) return;
    const input: AgentSettingsInput = {
      personality,
      verbosity,
      contextStrategy: strategy,
      autoExecute,
      subagentApproval: approveSubagents ? 'REQUIRED' : 'NOT_REQUIRED',
      approvalThreshold: Number(nums.approvalThreshold),
      maxTokensPerTask: Number(nums.maxTokensPerTask),
      maxRetries: Number(nums.maxRetries),
      timeoutSeconds: Number(nums.timeoutSeconds),
      team: {
        maxIterations: Number(nums.teamMaxIterations),
        timeoutMinutes: Number(nums.teamTimeoutMinutes),
        tokenBudget: Number(nums.teamTokenBudget),
        architectMaxTurns: Number(nums.teamArchitectMaxTurns),
        executorMaxTurns: Number(nums.teamExecutorMaxTurns),
        reviewerMaxTurns: Number(nums.teamReviewerMaxTurns),
      },
    };
    const r = await update({ input });
    if (!r.error) setSaved(true);
  };
  return (
    <form className="card" onSubmit={submit} noValidate aria-label="Agent settings" style={{ display: 'flex', flexDirection: 'column', gap: '1rem' }}>
      <div className="form-grid">
        <label>
          Personality
          <select value={personality} onChange={(e) => setPersonality(e.target.value as Personality)}>
            {['PRECISE', 'BALANCED', 'CREATIVE', 'MINIMAL'].map((p) => (
              <option key={p} value={p}>
                {p.toLowerCase()}
                {p === 'BALANCED' ? ' (default)' : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Verbosity
          <select value={verbosity} onChange={(e) => setVerbosity(e.target.value as Verbosity)}>
            {['MINIMAL', 'NORMAL', 'VERBOSE', 'DEBUG'].map((p) => (
              <option key={p} value={p}>
                {p.toLowerCase()}
                {p === 'NORMAL' ? ' (default)' : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Context strategy
          <select value={strategy} onChange={(e) => setStrategy(e.target.value as ContextStrategy)}>
            {['PRESERVE', 'COMPACT', 'SUMMARIZE'].map((p) => (
              <option key={p} value={p}>
                {p.toLowerCase()}
                {p === 'PRESERVE' ? ' (default)' : ''}
              </option>
            ))}
          </select>
        </label>
        <label className="check" style={{ alignSelf: 'end' }}>
          <input type="checkbox" checked={autoExecute} onChange={(e) => setAutoExecute(e.target.checked)} /> Auto-execute tool calls (off by default)
        </label>
        <label className="check" style={{ alignSelf: 'end' }}>
          <input type="checkbox" name="subagentApproval" checked={approveSubagents} onChange={(e) => setApproveSubagents(e.target.checked)} /> Sub-agents wait for my approval before they start (off by default)
        </label>
        {(Object.keys(RANGES) as NumField[]).map((k) => (
          <label key={k}>
            {RANGES[k].label}
            <input
              name={k}
              type="number"
              inputMode="numeric"
              min={RANGES[k].min}
              max={RANGES[k].max}
              value={nums[k]}
              aria-invalid={errs[k] ? 'true' : 'false'}
              onChange={(e) => {
                setNums({ ...nums, [k]: e.target.value });
                setErrs({ ...errs, [k]: undefined });
              }}
            />
            <span className="hint">
              {RANGES[k].min.toLocaleString('en-US')} to {RANGES[k].max.toLocaleString('en-US')}, default {RANGES[k].def.toLocaleString('en-US')}
              {RANGES[k].hint ? `: ${RANGES[k].hint}` : ''}
            </span>
            {errs[k] && (
              <span className="field-error" role="alert">
                {errs[k]}
              </span>
            )}
          </label>
        ))}
      </div>
      <ErrorBox error={res.error} />
      {saved && <div className="success">Saved. New runs use these settings.</div>}
      <div className="row end">
        <button className="primary" type="submit" disabled={res.fetching}>
          Save settings
        </button>
      </div>
    </form>
  );
}

const ROLES: Role[] = ['OWNER', 'ADMIN', 'MEMBER', 'VIEWER'];

function Keys() {
  const [q, refetch] = useQuery({ query: ApiKeys });
  const [created, create] = useMutation(CreateApiKey);
  const [revoked, revoke] = useMutation(RevokeApiKey);
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('MEMBER');
  const [secret, setSecret] = useState<string | null>(null);
  const keys = q.data?.apiKeys ?? [];
  return (
    <div className="grid">
      <form
        className="card row"
        onSubmit={async (e) => {
          e.preventDefault();
          const r = await create({ input: { name, role } });
          const key = r.data?.createApiKey;
          if (key) {
            setSecret(key.secret);
            setName('');
            refetch({ requestPolicy: 'network-only' });
          }
        }}
      >
        <input aria-label="Key name" required placeholder="Name, e.g. CI integration" value={name} onChange={(e) => setName(e.target.value)} style={{ flex: 1 }} />
        <select aria-label="Key role" value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
        <button className="primary" type="submit" disabled={created.fetching}>
          Create key
        </button>
      </form>
      <ErrorBox error={created.error ?? revoked.error ?? q.error} />
      {secret && (
        <div className="card" data-testid="secret">
          <strong>Copy this key now: it is shown only once.</strong>
          <div className="secret">{secret}</div>
          <div className="row" style={{ marginTop: '0.5rem' }}>
            <button className="small" onClick={() => void navigator.clipboard?.writeText(secret)}>
              Copy
            </button>
            <button className="small" onClick={() => setSecret(null)}>
              I saved it
            </button>
          </div>
        </div>
      )}
      {q.data && keys.length === 0 ? (
        <Empty title="No API keys.">Create one for an integration; it calls the GraphQL API with “Authorization: Bearer agk_…”.</Empty>
      ) : (
        <div className="card table-wrap">
          <table>
            <thead>
              <tr>
                <th>Name</th>
                <th>Prefix</th>
                <th>Role</th>
                <th>Created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id}>
                  <td>{k.name}</td>
                  <td>
                    <code>{k.prefix}</code>
                  </td>
                  <td>{k.role.toLowerCase()}</td>
                  <td>{dateTime(k.createdAt)}</td>
                  <td>
                    {k.revokedAt ? (
                      <Badge value="REVOKED" />
                    ) : (
                      <button
                        className="small danger"
                        onClick={async () => {
                          if (window.confirm(`Revoke “${k.name}”? Integrations using it stop working at once.`)) {
                            await revoke({ id: k.id });
                            refetch({ requestPolicy: 'network-only' });
                          }
                        }}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function Members() {
  const [list, refetch] = useQuery({ query: MembersQuery });
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('MEMBER');
  const [res, add] = useMutation(AddMember);
  const [added, setAdded] = useState<{ email: string; role: string; pending: boolean; token?: string | null }[]>([]);
  return (
    <div className="grid">
      <form
        className="card row"
        onSubmit={async (e: FormEvent) => {
          e.preventDefault();
          const r = await add({ input: { email, role } });
          const m = r.data?.addMember;
          if (m) {
            setAdded([{ email: m.user.email, role: m.role, pending: m.pending, token: m.invitationToken }, ...added]);
            setEmail('');
            refetch({ requestPolicy: 'network-only' });
          }
        }}
      >
        <input aria-label="Member email" type="email" required placeholder="colleague@example.com" value={email} onChange={(e) => setEmail(e.target.value)} style={{ flex: 1 }} />
        <select aria-label="Member role" value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
        <button className="primary" type="submit" disabled={res.fetching}>
          Add member
        </button>
      </form>
      <ErrorBox error={res.error} />
      <p className="muted small">
        Everyone is invited by email, with or without an account: they join once they open the link, signed in with that address verified. You can also pass the link on yourself (shown once).
      </p>
      <ErrorBox error={list.error} />
      {list.data && (
        <div className="card table-wrap">
          <table>
            <thead>
              <tr>
                <th>Member</th>
                <th>Role</th>
                <th>Joined</th>
              </tr>
            </thead>
            <tbody>
              {list.data.members.edges.map(({ node: m }) => (
                <tr key={m.user.id}>
                  <td>
                    {m.user.name ? `${m.user.name} · ` : ''}
                    {m.user.email} {m.pending && <Badge value="PENDING" />}
                  </td>
                  <td>{m.role.toLowerCase()}</td>
                  <td>{dateTime(m.joinedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {added.map((m) => (
        <div className="card" key={m.email}>
          <div className="row">
            <strong>{m.email}</strong>
            <span className="badge">{m.role.toLowerCase()}</span>
            {m.pending && <Badge value="PENDING" />}
          </div>
          {m.token && (
            <>
              <div className="small" style={{ marginTop: '0.5rem' }}>
                Invitation link (shown once):
              </div>
              <div className="secret">{`${window.location.origin}/accept-invitation?token=${encodeURIComponent(m.token)}`}</div>
            </>
          )}
        </div>
      ))}
    </div>
  );
}

function AcceptInvite() {
  const [token, setToken] = useState('');
  const [res, accept] = useMutation(AcceptInvitation);
  const [done, setDone] = useState(false);
  return (
    <form
      className="card"
      style={{ marginTop: '1rem', display: 'flex', flexDirection: 'column', gap: '0.5rem' }}
      aria-label="Accept an invitation"
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(false);
        const r = await accept({ token: token.trim() });
        if (r.data?.acceptInvitation) {
          setDone(true);
          setToken('');
        }
      }}
    >
      <strong>Accept an invitation to another organisation</strong>
      <div className="row">
        <input aria-label="Invitation token" required value={token} onChange={(e) => setToken(e.target.value)} placeholder="Invitation token" style={{ flex: 1 }} />
        <button type="submit" disabled={res.fetching}>
          Accept
        </button>
      </div>
      <ErrorBox error={res.error} />
      {done && <div className="success">Accepted. Log out and log in to that organisation to work in it.</div>}
    </form>
  );
}
