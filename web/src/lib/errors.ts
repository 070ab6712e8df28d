// Every error the API returns, in words, by its extensions.code.
import type { CombinedError } from 'urql';

export interface ErrorInfo {
  code: string;
  message: string;
  field?: string;
  /** Seconds to wait before retrying (RATE_LIMITED). */
  retryAfter?: number;
}

export function errorInfo(e: CombinedError | null | undefined): ErrorInfo | null {
  if (!e) return null;
  const g = e.graphQLErrors[0];
  if (g) {
    const ext = (g.extensions ?? {}) as Record<string, unknown>;
    return {
      code: String(ext.code ?? 'INTERNAL'),
      message: g.message,
      field: ext.field as string | undefined,
      retryAfter: typeof ext.retryAfter === 'number' ? ext.retryAfter : undefined,
    };
  }
  if (e.networkError) return { code: 'NETWORK', message: e.networkError.message };
  return { code: 'INTERNAL', message: e.message };
}

function retryAfter(message: string, seconds?: number): string {
  if (seconds !== undefined) return seconds < 90 ? `in ${Math.max(1, Math.ceil(seconds))} seconds` : `in ${Math.ceil(seconds / 60)} minutes`;
  const m = /(\d+(?:\.\d+)?)\s*(ms|s|seconds?|m|minutes?)\b/.exec(message);
  if (!m) return 'in a moment';
  return `in ${m[1]} ${m[2].startsWith('m') && m[2] !== 'ms' ? 'minutes' : m[2] === 'ms' ? 'ms' : 'seconds'}`;
}

/** A sentence for a person: what happened and what to do next. */
export function errorText(e: CombinedError | ErrorInfo | null | undefined): string | null {
  const info = e && 'graphQLErrors' in e ? errorInfo(e) : (e as ErrorInfo | null | undefined);
  if (!info) return null;
  const msg = info.message.replace(/^\[GraphQL\]\s*/, '');
  switch (info.code) {
    case 'UNAUTHENTICATED':
      return `You are not logged in (${msg}).`;
    case 'FORBIDDEN':
      return `Your role does not allow this: ${msg}. Ask an owner or admin of the organisation.`;
    case 'NOT_FOUND':
      return `Not found: ${msg}. It may have been deleted, or it belongs to someone else.`;
    case 'BAD_USER_INPUT':
      // The server's message starts with the field's name ("spendBurst: must be ..."): said once.
      return info.field ? `Check “${info.field}”: ${msg.startsWith(`${info.field}: `) ? msg.slice(info.field.length + 2) : msg}` : `Check your input: ${msg}`;
    case 'BUDGET_EXCEEDED':
      return `The budget is used up: ${msg}. Ask an admin to raise it, or try again when the budget's period starts over.`;
    case 'RATE_LIMITED':
      return `Too many requests right now. Try again ${retryAfter(msg, info.retryAfter)}. (${msg})`;
    case 'CONFLICT':
      return `That cannot be done now: ${msg}`;
    case 'NETWORK':
      return `The server cannot be reached (${msg}). Check your connection; the app retries on its own.`;
    case 'INTERNAL':
      return 'Something went wrong on the server. Try again; if it keeps happening, tell your administrator.';
    default:
      return msg;
  }
}
