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
  // Left blank, a spend figure keeps the plan's own (a new plan gets the server's defaults).
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
  // Picking a plan in the table fills the form with its figures.
  const edit = (p: { name: string; subagentsRunningMax: number; spendRate: number; spendBurst: number }) => {
    setName(p.name);
    setMax(String(p.subagentsRunningMax));
    setRate(String(p.spendRate));
    setBurst(String(p.spendBurst));
  };
  const move = async (e: FormEvent) => {
    e.preventDefault();
    await setTenantPlan({ tenantId: globalIDOf('Tenant', tenant), plan: plan.trim() });
  };
  return (
    <div className="card" style={{ marginTop: '1rem' }} aria-label="Plans">
      <h3 style={{ marginTop: 0 }}>Plans</h3>
      <p className="muted small">Limits per tenant on the plan. Pick a plan to edit it; a spend field left empty keeps the plan's own (a new plan's defaults).</p>
      <ErrorBox error={q.error} />
      <div className="table-wrap">
        <table>
          <thead>
            <tr>
              <th>Plan</th>
              <th className="num" title="Sub-agents of one tenant queued or running at once">
                Sub-agents<span className="hide-phone"> per tenant</span>
              </th>
              <th className="num" title="Spending mutations one tenant may make per second">
                Spend<span className="hide-phone"> per second</span>
                <span className="mobile-only">/s</span>
              </th>
              <th className="num" title="Spending mutations one tenant may make at once">
                <span className="hide-phone">Spend </span>burst
              </th>
            </tr>
          </thead>
          <tbody>
            {q.data?.plans.map((p) => (
              <tr key={p.name}>
                <td>
                  <button type="button" className="link" title="Edit this plan's limits in the form below" onClick={() => edit(p)}>
                    {p.name}
                  </button>
                </td>
                <td className="num">{p.subagentsRunningMax}</td>
                <td className="num">{p.spendRate}</td>
                <td className="num">{p.spendBurst}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {/* noValidate: a figure out of range goes to the server, whose BAD_USER_INPUT names the field and the bounds. */}
      <form className="row" style={{ marginTop: '0.75rem', alignItems: 'flex-end' }} onSubmit={save} noValidate aria-label="Set a plan">
        <label style={{ flex: '2 1 12rem' }}>
          Plan name
          <input placeholder="e.g. team" value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label style={{ flex: '1 1 6rem' }}>
          Sub-agents per tenant
          <input type="number" min={1} max={10000} value={max} onChange={(e) => setMax(e.target.value)} />
        </label>
        <label style={{ flex: '1 1 6rem' }}>
          Spend per second
          <input placeholder="keep" type="number" min={1} max={100000} value={rate} onChange={(e) => setRate(e.target.value)} />
        </label>
        <label style={{ flex: '1 1 6rem' }}>
          Spend burst
          <input placeholder="keep" type="number" min={1} max={100000} value={burst} onChange={(e) => setBurst(e.target.value)} />
        </label>
        <button type="submit" className="primary" disabled={set.fetching || !name.trim()}>
          Save plan
        </button>
      </form>
      <ErrorBox error={set.error} />
      <form className="row" style={{ marginTop: '1rem', alignItems: 'flex-end' }} onSubmit={move} aria-label="Move a tenant">
        <label style={{ flex: '2 1 12rem' }}>
          Tenant id
          <input placeholder="the tenant to move" value={tenant} onChange={(e) => setTenant(e.target.value)} />
        </label>
        <label style={{ flex: '1 1 8rem' }}>
          Plan
          <select value={plan} onChange={(e) => setPlanName(e.target.value)}>
            {q.data?.plans.map((p) => (
              <option key={p.name} value={p.name}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={moved.fetching || !tenant.trim()}>
          Move tenant
        </button>
        {moved.data?.setTenantPlan && <span className="muted small">on {moved.data.setTenantPlan.plan}</span>}
      </form>
      <ErrorBox error={moved.error} />
    </div>
  );
}
