import type { ReactNode } from 'react';
import type { CombinedError } from 'urql';
import { errorText } from '../lib/errors';

export function ErrorBox({ error }: { error: CombinedError | string | null | undefined }) {
  if (!error) return null;
  const text = typeof error === 'string' ? error : errorText(error);
  if (!text) return null;
  return (
    <div className="error" role="alert">
      {text}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <strong>{title}</strong>
      {children}
    </div>
  );
}

export function Badge({ value }: { value: string | null | undefined }) {
  if (!value) return null;
  return <span className={`badge ${value}`}>{value.replace(/_/g, ' ').toLowerCase()}</span>;
}

export function Loading({ what }: { what?: string }) {
  return (
    <div className="muted" role="status">
      <span className="spinner" /> Loading{what ? ` ${what}` : ''}…
    </div>
  );
}

export function Json({ value }: { value: unknown }) {
  let v = value;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return <pre>{String(v)}</pre>;
    }
  }
  return <pre>{JSON.stringify(v, null, 2)}</pre>;
}
