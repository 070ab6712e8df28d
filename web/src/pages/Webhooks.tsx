import { useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { Badge, Empty, ErrorBox, Loading } from '../components/ui';
import { session } from '../lib/client';
import { CreateWebhook, DeleteWebhook, TestWebhook, Webhooks } from '../lib/ops';

// A random secret of 32 bytes, hex: what a receiver needs to check signatures.
function newSecret(): string {
  const b = new Uint8Array(32);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export function WebhooksPage() {
  const v = session.viewer;
  const admin = v?.role === 'OWNER' || v?.role === 'ADMIN';
  const [q, refetch] = useQuery({ query: Webhooks, pause: !admin, requestPolicy: 'cache-and-network' });
  const [created, create] = useMutation(CreateWebhook);
  const [, remove] = useMutation(DeleteWebhook);
  const [tested, test] = useMutation(TestWebhook);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState('execution.*, budget.*, approval.requested');
  const [secret, setSecret] = useState(newSecret);
  if (!admin) {
    return (
      <div className="page">
        <div className="notice">Webhooks are managed by the tenant's owners and admins.</div>
      </div>
    );
  }
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    const res = await create({ input: { url, events: events.split(',').map((s) => s.trim()).filter(Boolean), secret } });
    if (!res.error) {
      setUrl('');
      setSecret(newSecret());
      refetch({ requestPolicy: 'network-only' });
    }
  };
  return (
    <div className="page" style={{ maxWidth: 1100 }}>
      <h1>Webhooks</h1>
      <p className="muted">
        Events whose type matches a pattern are POSTed to the URL, signed: <code>Agentry-Signature: v1=HMAC-SHA256(secret, timestamp + "." + body)</code>,
        with <code>Agentry-Timestamp</code>, <code>Agentry-Event</code> and <code>Agentry-Delivery</code>. Keep the secret: it is not shown again.
      </p>
      <form className="card" onSubmit={submit} aria-label="New webhook">
        <div className="grid cols-2">
          <label>
            URL
            <input required type="url" placeholder="https://example.com/hooks/agentry" value={url} onChange={(e) => setUrl(e.target.value)} />
          </label>
          <label>
            Events (comma separated, globs allowed)
            <input required value={events} onChange={(e) => setEvents(e.target.value)} />
          </label>
        </div>
        <label>
          Secret (at least 32 bytes)
          <input required minLength={32} value={secret} onChange={(e) => setSecret(e.target.value)} />
        </label>
        <div className="row" style={{ marginTop: '0.5rem' }}>
          <button type="submit" disabled={created.fetching}>
            Add webhook
          </button>
        </div>
        <ErrorBox error={created.error} />
      </form>
      <ErrorBox error={q.error || tested.error} />
      {!q.data && q.fetching && <Loading what="webhooks" />}
      {q.data && q.data.webhooks.length === 0 && <Empty title="No webhooks yet">Add one above to receive run, approval and budget events.</Empty>}
      {q.data?.webhooks.map((w) => (
        <div className="card" key={w.id} style={{ marginTop: '1rem' }} data-testid="webhook">
          <div className="row">
            <strong style={{ wordBreak: 'break-all' }}>{w.url}</strong>
            <span className="spacer" />
            <button
              onClick={async () => {
                await test({ id: w.id });
                refetch({ requestPolicy: 'network-only' });
              }}
              disabled={tested.fetching}
            >
              Send test
            </button>
            <button className="link" onClick={() => refetch({ requestPolicy: 'network-only' })}>
              Refresh
            </button>
            <button
              className="danger"
              onClick={async () => {
                if (confirm(`Delete the webhook to ${w.url}?`)) {
                  await remove({ id: w.id });
                  refetch({ requestPolicy: 'network-only' });
                }
              }}
            >
              Delete
            </button>
          </div>
          <div className="muted small">{w.events.join(', ')}</div>
          <table style={{ marginTop: '0.5rem' }} aria-label="Delivery log">
            <thead>
              <tr>
                <th>When</th>
                <th>Event</th>
                <th>Status</th>
                <th>Attempts</th>
                <th>Answer</th>
                <th>Time</th>
              </tr>
            </thead>
            <tbody>
              {w.deliveries.length === 0 && (
                <tr>
                  <td colSpan={6} className="muted">
                    No deliveries yet.
                  </td>
                </tr>
              )}
              {w.deliveries.map((d) => (
                <tr key={d.id}>
                  <td>{new Date(d.createdAt).toLocaleString()}</td>
                  <td>{d.event}</td>
                  <td>
                    <Badge value={d.status} />
                  </td>
                  <td>{d.attempts}</td>
                  <td title={d.error ?? undefined}>{d.responseCode ?? (d.error ? 'error' : '—')}</td>
                  <td>{d.durationMs != null ? `${d.durationMs} ms` : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </div>
  );
}
