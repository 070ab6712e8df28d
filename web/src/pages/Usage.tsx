import { useMemo, useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { BucketTable, CostChart, TokensChart, fillDays, type Bucket } from '../components/charts';
import { ErrorBox, Loading } from '../components/ui';
import { session } from '../lib/client';
import { dateTime, money, tokens } from '../lib/format';
import { DeleteBudget, SetBudget, Usage } from '../lib/ops';
import { Stat } from './Runs';
import type { BudgetPeriod, BudgetScope } from '../gql/graphql';

export function rangeOf(days: number, now = new Date()): { from: Date; to: Date } {
  // UTC days: [the start of the day `days - 1` days ago, the start of tomorrow).
  const to = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
  const from = new Date(to.getTime() - days * 86_400_000);
  return { from, to };
}

function total(rows: Bucket[]) {
  return rows.reduce(
    (t, r) => ({ calls: t.calls + r.calls, tokens: t.tokens + r.inputTokens + r.outputTokens, cost: t.cost + r.costMicros }),
    { calls: 0, tokens: 0, cost: 0 },
  );
}

/** A custom range of UTC days, both ends included: [from 00:00, the day after to 00:00). */
function customRange(fromDay: string, toDay: string): { from: Date; to: Date } | null {
  const f = Date.parse(`${fromDay}T00:00:00Z`);
  const t = Date.parse(`${toDay}T00:00:00Z`);
  if (Number.isNaN(f) || Number.isNaN(t) || t < f) return null;
  return { from: new Date(f), to: new Date(t + 86_400_000) };
}

export function UsagePage() {
  const [days, setDays] = useState(7);
  const today = new Date().toISOString().slice(0, 10);
  const [fromDay, setFromDay] = useState(today);
  const [toDay, setToDay] = useState(today);
  const custom = days === 0 ? customRange(fromDay, toDay) : null;
  const { from, to } = useMemo(() => custom ?? rangeOf(days || 7), [days, custom?.from.getTime(), custom?.to.getTime()]); // eslint-disable-line react-hooks/exhaustive-deps
  const [q, refetch] = useQuery({ query: Usage, variables: { from: from.toISOString(), to: to.toISOString() }, requestPolicy: 'cache-and-network' });
  const v = session.viewer;
  const admin = v?.role === 'OWNER' || v?.role === 'ADMIN';
  const d = q.data;
  const t = total(d?.byDay ?? []);
  const emails = new Map<string, string>();
  for (const e of d?.activity.edges ?? []) emails.set(e.node.user.id, e.node.user.email);
  for (const b of d?.budgets ?? []) if (b.user) emails.set(b.user.id, b.user.email);
  if (v) emails.set(v.userId, v.email);
  return (
    <div className="page" style={{ maxWidth: 1280 }} data-testid="usage-page">
      <div className="row">
        <h1 style={{ margin: 0 }}>{admin ? `Usage of ${v?.tenantName}` : 'Your usage'}</h1>
        <span className="spacer" />
        <select aria-label="Range" value={days} onChange={(e) => setDays(Number(e.target.value))}>
          <option value={1}>Today</option>
          <option value={7}>Last 7 days</option>
          <option value={30}>Last 30 days</option>
          <option value={90}>Last 90 days</option>
          <option value={0}>Custom…</option>
        </select>
        {days === 0 && (
          <>
            <input type="date" aria-label="From" value={fromDay} max={toDay} onChange={(e) => setFromDay(e.target.value)} />
            <input type="date" aria-label="To" value={toDay} min={fromDay} onChange={(e) => setToDay(e.target.value)} />
          </>
        )}
        <button onClick={() => refetch({ requestPolicy: 'network-only' })}>Refresh</button>
      </div>
      <p className="muted small">
        {admin ? 'Everyone in the organisation' : 'Your own runs'}, {from.toISOString().slice(0, 10)} to {new Date(to.getTime() - 1).toISOString().slice(0, 10)} (UTC days).
      </p>
      <ErrorBox error={q.error} />
      {!d && q.fetching && <Loading what="usage" />}
      {d && (
        <>
          <div className="grid cols-4">
            <Stat label="Model calls" value={String(t.calls)} />
            <Stat label="Tokens" value={tokens(t.tokens)} />
            <Stat label="Cost" value={money(t.cost)} />
            <Stat label="Cost per call" value={t.calls ? money(Math.round(t.cost / t.calls)) : '—'} />
          </div>
          <div data-testid="usage-totals" data-calls={t.calls} data-tokens={t.tokens} data-cost={t.cost} hidden />
          <div className="grid cols-2" style={{ marginTop: '1rem' }}>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>Tokens per day</h3>
              <TokensChart data={fillDays(d.byDay, from, to)} />
            </div>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>Cost per day</h3>
              <CostChart data={fillDays(d.byDay, from, to)} />
            </div>
          </div>
          <div className="grid cols-2" style={{ marginTop: '1rem' }}>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>By model</h3>
              <BucketTable rows={d.byModel} label="Model" />
            </div>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>By run kind</h3>
              <BucketTable rows={d.byKind} label="Kind" name={(k) => k.replace('_', ' ').toLowerCase()} />
            </div>
          </div>
          {admin && (
            <div className="card" style={{ marginTop: '1rem' }}>
              <h3 style={{ marginTop: 0 }}>By user</h3>
              <BucketTable rows={d.byUser} label="User" name={(k) => emails.get(k) ?? k} />
            </div>
          )}
          <Budgets budgets={d.budgets} admin={admin} emails={emails} onChange={() => refetch({ requestPolicy: 'network-only' })} />
          <h2>Rate limits</h2>
          <p className="muted small">
            Messages, task runs, approvals and resumes are rate limited per organisation by its plan (and each API key gets half of it). A refused request says when to retry.
          </p>
        </>
      )}
    </div>
  );
}

interface BudgetRow {
  id: string;
  scope: BudgetScope;
  period: BudgetPeriod;
  tokenLimit?: number | null;
  costLimitMicros?: number | null;
  spentTokens: number;
  spentMicros: number;
  reservedTokens: number;
  reservedMicros: number;
  periodStart: string;
  user?: { id: string; email: string } | null;
}

function Meter({ spent, reserved, limit, fmt }: { spent: number; reserved: number; limit: number; fmt: (n: number) => string }) {
  const pct = (n: number) => `${Math.min(100, (100 * n) / Math.max(limit, 1))}%`;
  return (
    <div>
      <div className={`bar${spent >= limit ? ' over' : ''}`} role="meter" aria-valuemin={0} aria-valuemax={limit} aria-valuenow={spent + reserved}>
        <div className="spent" style={{ width: pct(spent) }} />
        <div className="reserved" style={{ width: pct(reserved) }} />
      </div>
      <div className="small muted">
        {fmt(spent)} spent{reserved ? `, ${fmt(reserved)} reserved` : ''} of {fmt(limit)}
      </div>
    </div>
  );
}

function Budgets({ budgets, admin, emails, onChange }: { budgets: BudgetRow[]; admin: boolean; emails: Map<string, string>; onChange: () => void }) {
  const [del, deleteBudget] = useMutation(DeleteBudget);
  return (
    <>
      <h2>Budgets</h2>
      <ErrorBox error={del.error} />
      {budgets.length === 0 && <p className="muted">No budgets: spending is not limited{admin ? '. Set one below.' : '.'}</p>}
      <div className="grid cols-2">
        {budgets.map((b) => (
          <div className="card" key={b.id} data-testid="budget">
            <div className="row">
              <strong>
                {b.scope === 'TENANT' ? 'Organisation' : (b.user?.email ?? emails.get(b.user?.id ?? '') ?? 'user')} · per {b.period.toLowerCase()}
              </strong>
              <span className="spacer" />
              {admin && (
                <button
                  className="small danger"
                  onClick={async () => {
                    if (window.confirm('Delete this budget?')) {
                      await deleteBudget({ id: b.id });
                      onChange();
                    }
                  }}
                >
                  Delete
                </button>
              )}
            </div>
            <div className="muted small" style={{ marginBottom: '0.5rem' }}>
              Since {dateTime(b.periodStart)}
            </div>
            {b.tokenLimit != null && <Meter spent={b.spentTokens} reserved={b.reservedTokens} limit={b.tokenLimit} fmt={tokens} />}
            {b.costLimitMicros != null && <Meter spent={b.spentMicros} reserved={b.reservedMicros} limit={b.costLimitMicros} fmt={money} />}
          </div>
        ))}
      </div>
      {admin && <BudgetForm users={[...emails.entries()]} onDone={onChange} />}
    </>
  );
}

function BudgetForm({ users, onDone }: { users: [string, string][]; onDone: () => void }) {
  const [scope, setScope] = useState<BudgetScope>('TENANT');
  const [userId, setUserId] = useState('');
  const [period, setPeriod] = useState<BudgetPeriod>('MONTH');
  const [tokenLimit, setTokenLimit] = useState('');
  const [cost, setCost] = useState('');
  const [err, setErr] = useState<string | null>(null);
  const [res, set] = useMutation(SetBudget);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setErr(null);
    const tl = tokenLimit.trim() === '' ? null : Number(tokenLimit);
    const cl = cost.trim() === '' ? null : Math.round(Number(cost) * 1_000_000);
    if ((tl !== null && (!Number.isInteger(tl) || tl < 0)) || (cl !== null && (!Number.isFinite(cl) || cl < 0))) {
      setErr('Limits are positive numbers (tokens: whole; cost: dollars).');
      return;
    }
    if (scope === 'USER' && !userId) {
      setErr('Choose the user the budget is for.');
      return;
    }
    if (tl === null && cl === null) {
      setErr('Give a token limit, a cost limit, or both.');
      return;
    }
    const r = await set({ input: { scope, period, userId: scope === 'USER' ? userId.trim() : null, tokenLimit: tl, costLimitMicros: cl } });
    if (!r.error) {
      setTokenLimit('');
      setCost('');
      onDone();
    }
  };
  return (
    <form className="card" onSubmit={submit} style={{ marginTop: '1rem', display: 'flex', flexDirection: 'column', gap: '0.75rem' }} aria-label="Set a budget">
      <strong>Set a budget</strong>
      <div className="form-grid">
        <label>
          Scope
          <select value={scope} onChange={(e) => setScope(e.target.value as BudgetScope)}>
            <option value="TENANT">the whole organisation</option>
            <option value="USER">one user</option>
          </select>
        </label>
        {scope === 'USER' && (
          <label>
            User
            <select value={userId} onChange={(e) => setUserId(e.target.value)} required>
              <option value="">choose…</option>
              {users.map(([id, email]) => (
                <option key={id} value={id}>
                  {email}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Period
          <select value={period} onChange={(e) => setPeriod(e.target.value as BudgetPeriod)}>
            <option value="DAY">day (UTC)</option>
            <option value="MONTH">month (UTC)</option>
          </select>
        </label>
        <label>
          Token limit
          <input inputMode="numeric" value={tokenLimit} onChange={(e) => setTokenLimit(e.target.value)} placeholder="no limit" />
        </label>
        <label>
          Cost limit ($)
          <input inputMode="decimal" value={cost} onChange={(e) => setCost(e.target.value)} placeholder="no limit" />
        </label>
      </div>
      {err && <div className="error">{err}</div>}
      <ErrorBox error={res.error} />
      <div className="row end">
        <button className="primary" type="submit" disabled={res.fetching}>
          Save budget
        </button>
      </div>
    </form>
  );
}
