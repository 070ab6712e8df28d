import { Fragment } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { money, tokens } from '../lib/format';

export interface Bucket {
  key: string;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
}

/** Fills the days of [from, to) that have no usage with zeros, so the axis shows every day. */
export function fillDays(buckets: Bucket[], from: Date, to: Date): Bucket[] {
  const by = new Map(buckets.map((b) => [b.key, b]));
  const out: Bucket[] = [];
  for (let d = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate())); d < to; d = new Date(d.getTime() + 86_400_000)) {
    const key = d.toISOString().slice(0, 10);
    out.push(by.get(key) ?? { key, calls: 0, inputTokens: 0, outputTokens: 0, costMicros: 0 });
  }
  return out;
}

const axis = { stroke: 'var(--muted)', fontSize: 12 };

export function TokensChart({ data }: { data: Bucket[] }) {
  return (
    <ResponsiveContainer width="100%" height={240}>
      <BarChart data={data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        <CartesianGrid strokeDasharray="3 3" stroke="var(--border)" vertical={false} />
        <XAxis dataKey="key" tick={axis} tickFormatter={(k: string) => k.slice(5)} />
        <YAxis tick={axis} tickFormatter={(v: number) => tokens(v)} width={48} />
        <Tooltip contentStyle={{ background: 'var(--panel)', border: '1px solid var(--border)' }} formatter={(v) => tokens(Number(v))} />
        <Legend />
        <Bar dataKey="inputTokens" name="input tokens" stackId="t" fill="#6366f1" isAnimationActive={false} />
        <Bar dataKey="outputTokens" name="output tokens" stackId="t" fill="#22c55e" isAnimationActive={false} />
      </BarChart>
    </ResponsiveContainer>
  );
}

export function CostChart({ data }: { data: Bucket[] }) {
  return (
    <ResponsiveContainer width="100%" height={240}>
      <BarChart data={data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        <CartesianGrid strokeDasharray="3 3" stroke="var(--border)" vertical={false} />
        <XAxis dataKey="key" tick={axis} tickFormatter={(k: string) => k.slice(5)} />
        <YAxis tick={axis} tickFormatter={(v: number) => (v === 0 ? '$0' : `$${Number((v / 1_000_000).toPrecision(2))}`)} width={56} />
        <Tooltip contentStyle={{ background: 'var(--panel)', border: '1px solid var(--border)' }} formatter={(v) => money(Number(v))} />
        <Bar dataKey="costMicros" name="cost" fill="#f59e0b" isAnimationActive={false} />
      </BarChart>
    </ResponsiveContainer>
  );
}

// breakable lets a bucket's name wrap only after a colon ("anthropic:" / "claude-sonnet-4-5"),
// not inside a model's name; a name without one (an email) wraps where it must.
function breakable(text: string) {
  const parts = text.split(/(?<=:)/);
  if (parts.length === 1) return text;
  return parts.map((part, i) => (
    <Fragment key={i}>
      {i > 0 && <wbr />}
      <span style={{ whiteSpace: 'nowrap' }}>{part}</span>
    </Fragment>
  ));
}

export function BucketTable({ rows, label, name }: { rows: Bucket[]; label: string; name?: (key: string) => string }) {
  if (rows.length === 0) return <p className="muted">No usage in this range.</p>;
  const max = Math.max(...rows.map((r) => r.costMicros), 1);
  return (
    <div className="table-wrap">
      <table>
        <thead>
          <tr>
            <th>{label}</th>
            <th className="num">Calls</th>
            <th className="num">Tokens</th>
            <th className="num">Cost</th>
            <th className="hide-phone" style={{ width: '25%' }} />
          </tr>
        </thead>
        <tbody>
          {[...rows]
            .sort((a, b) => b.costMicros - a.costMicros || b.inputTokens + b.outputTokens - (a.inputTokens + a.outputTokens))
            .map((r) => (
              <tr key={r.key}>
                <td style={{ overflowWrap: 'break-word' }}>{breakable(name ? name(r.key) : r.key)}</td>
                <td className="num">{r.calls}</td>
                <td className="num">{tokens(r.inputTokens + r.outputTokens)}</td>
                <td className="num">{money(r.costMicros)}</td>
                <td className="hide-phone">
                  <div className="bar">
                    <div className="spent" style={{ width: `${(100 * r.costMicros) / max}%` }} />
                  </div>
                </td>
              </tr>
            ))}
        </tbody>
      </table>
    </div>
  );
}
