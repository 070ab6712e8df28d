import { type FormEvent, useMemo, useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { BucketTable, CostChart, TokensChart, fillDays } from '../components/charts';
import { Badge, ErrorBox, Loading } from '../components/ui';
import { session } from '../lib/client';
import { globalIDOf } from '../lib/format';
import { PlatformHealth, PlatformUsage, Plans as PlansQuery, SetPlan, SetTenantPlan } from '../lib/ops';
import { rangeOf } from './Usage';

// The jobs UI (River UI at /admin/jobs) is loaded by navigation, without the Authorization
// header: the access token goes in a cookie scoped to its path, then the UI opens in a new tab.
async function openJobsUI() {
  const token = await session.token();
  if (!token) return;
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `agentry_admin_token=${encodeURIComponent(token)}; Path=/admin/jobs; SameSite=Strict; Max-Age=900${secure}`;
  window.open('/admin/jobs/', '_blank', 'noopener');
}

export function AdminPage() {
  const [days, setDays] = useState(30);
  const { from, to } = useMemo(() => rangeOf(days), [days]);
  const [q] = useQuery({ query: PlatformUsage, variables: { from: from.toISOString(), to: to.toISOString() }, pause: !session.viewer?.platformAdmin });
  const [health] = useQuery({ query: PlatformHealth, pause: !session.viewer?.platformAdmin, requestPolicy: 'network-only' });
  if (!session.viewer?.platformAdmin) {
    return (
      <div className="page">
        <div className="notice">Platform administration is for platform admins (made with “agentry admin grant EMAIL”).</div>
      </div>
    );
  }
  const d = q.data;
  return (
    <div className="page" style={{ maxWidth: 1280 }}>
      <div className="row">
        <h1 style={{ margin: 0 }}>Platform</h1>
        <span className="spacer" />
        <select aria-label="Range" value={days} onChange={(e) => setDays(Number(e.target.value))}>
          <option value={7}>Last 7 days</option>
          <option value={30}>Last 30 days</option>
          <option value={90}>Last 90 days</option>
        </select>
      </div>
      <div className="card" style={{ marginTop: '1rem' }} aria-label="Health">
        <div className="row">
          <h3 style={{ margin: 0 }}>Health</h3>
          <span className="spacer" />
          <button onClick={openJobsUI}>Open the jobs UI</button>
        </div>
        <ErrorBox error={health.error} />
        <div className="row" style={{ flexWrap: 'wrap', gap: '1rem', marginTop: '0.5rem' }}>
          {health.data?.platformHealth.map((c) => (
            <span key={c.name} title={c.error ?? undefined}>
              {c.name} <Badge value={c.status} /> <span className="muted small">{c.latencyMs.toFixed(1)} ms</span>
            </span>
          ))}
        </div>
      </div>
      <Plans />
      <ErrorBox error={q.error} />
      {!d && q.fetching && <Loading what="platform usage" />}
      {d && (
        <>
          <div className="grid cols-2" style={{ marginTop: '1rem' }}>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>Tokens per day, all tenants</h3>
              <TokensChart data={fillDays(d.byDay, from, to)} />
            </div>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>Cost per day, all tenants</h3>
              <CostChart data={fillDays(d.byDay, from, to)} />
            </div>
          </div>
          <div className="grid cols-2" style={{ marginTop: '1rem' }}>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>Tenants</h3>
              <BucketTable rows={d.byTenant} label="Tenant" />
            </div>
            <div className="card">
              <h3 style={{ marginTop: 0 }}>Models</h3>
              <BucketTable rows={d.byModel} label="Model" />
            </div>
          </div>
        </>
      )}
    </div>
  );
}

/** Plans: each one's limits per tenant (running sub-agents, spending); create or change one, move a tenant. */
function Plans() {
  const [q, refetch] = useQuery({ query: PlansQuery });
  const [set, setPlan] = useMutation(SetPlan);
  const [moved, setTenantPlan] = useMutation(SetTenantPlan);
  const [name, setName] = useState('');
  const [max, setMax] = useState('8');
  // Left blank, a spend figure keeps the plan's own (a new plan's: 10 a second, bursts of 20).
  const [rate, setRate] = useState('');
  const [burst, setBurst] = useState('');
  const [tenant, setTenant] = useState('');
  const [plan, setPlanName] = useState('free');
  const save = async (e: FormEvent) => {
    e.preventDefault();
    const r = await setPlan({
      input: {
        name: name.trim(),
        subagentsRunningMax: Number(max),
        spendRate: rate.trim() ? Number(rate) : null,
        spendBurst: burst.trim() ? Number(burst) : null,
      },
    });
    if (!r.error) refetch({ requestPolicy: 'network-only' });
  };
  const move = async (e: FormEvent) => {
    e.preventDefault();
    await setTenantPlan({ tenantId: globalIDOf('Tenant', tenant), plan: plan.trim() });
  };
  return (
    <div className="card" style={{ marginTop: '1rem' }} aria-label="Plans">
      <h3 style={{ marginTop: 0 }}>Plans</h3>
      <ErrorBox error={q.error} />
      <table>
        <thead>
          <tr>
            <th>Plan</th>
            <th>Running sub-agents per tenant</th>
            <th>Spending per second</th>
            <th>Spending burst</th>
          </tr>
        </thead>
        <tbody>
          {q.data?.plans.map((p) => (
            <tr key={p.name}>
              <td>{p.name}</td>
              <td>{p.subagentsRunningMax}</td>
              <td>{p.spendRate}</td>
              <td>{p.spendBurst}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <form className="row" style={{ marginTop: '0.5rem', gap: '0.5rem' }} onSubmit={save} aria-label="Set a plan">
        <input aria-label="Plan name" placeholder="plan name" value={name} onChange={(e) => setName(e.target.value)} />
        <input aria-label="Running sub-agents per tenant" type="number" min={1} max={10000} value={max} onChange={(e) => setMax(e.target.value)} />
        <input aria-label="Spending per second" placeholder="per second (keep)" type="number" min={1} max={100000} value={rate} onChange={(e) => setRate(e.target.value)} />
        <input aria-label="Spending burst" placeholder="burst (keep)" type="number" min={1} max={100000} value={burst} onChange={(e) => setBurst(e.target.value)} />
        <button type="submit" disabled={set.fetching || !name.trim()}>
          Save plan
        </button>
      </form>
      <ErrorBox error={set.error} />
      <form className="row" style={{ marginTop: '0.5rem', gap: '0.5rem' }} onSubmit={move} aria-label="Move a tenant">
        <input aria-label="Tenant id" placeholder="tenant id" value={tenant} onChange={(e) => setTenant(e.target.value)} />
        <select aria-label="Plan" value={plan} onChange={(e) => setPlanName(e.target.value)}>
          {q.data?.plans.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name}
            </option>
          ))}
        </select>
        <button type="submit" disabled={moved.fetching || !tenant.trim()}>
          Move tenant
        </button>
        {moved.data?.setTenantPlan && <span className="muted small">on {moved.data.setTenantPlan.plan}</span>}
      </form>
      <ErrorBox error={moved.error} />
    </div>
  );
}
