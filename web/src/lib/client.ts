// The urql client: queries and mutations over POST /graphql, subscriptions over the
// graphql-transport-ws WebSocket on the same endpoint (graphql-ws). The auth exchange adds the
// access token and renews it (single-flight, in Session) before it expires or when the server
// answers UNAUTHENTICATED; the WebSocket authenticates in connection_init with a fresh token
// every time it (re)connects.
import { Client, cacheExchange, fetchExchange, stringifyDocument, subscriptionExchange, type Exchange } from 'urql';
import { authExchange } from '@urql/exchange-auth';
import { createClient as createWSClient, type Client as WSClient } from 'graphql-ws';
import { REFRESH_KEY, Session, SessionExpiredError, browserLock, type Tokens, type ViewerInfo } from './session';
import { RefreshSessionDocument } from '../gql/graphql';

export function endpoint(): string {
  return new URL('/graphql', window.location.href).toString();
}

export function wsEndpoint(): string {
  const u = new URL('/graphql', window.location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

interface AuthPayloadShape {
  accessToken: string;
  refreshToken: string;
  expiresAt: string;
  viewer: {
    role: string;
    platformAdmin: boolean;
    user: { id: string; email: string; name?: string | null };
    tenant: { id: string; name: string };
  };
}

export function viewerOf(p: AuthPayloadShape): ViewerInfo {
  return {
    userId: p.viewer.user.id,
    email: p.viewer.user.email,
    name: p.viewer.user.name,
    tenantId: p.viewer.tenant.id,
    tenantName: p.viewer.tenant.name,
    role: p.viewer.role,
    platformAdmin: p.viewer.platformAdmin,
  };
}

/** Spends a refresh token with a plain request (outside urql: the auth exchange waits on it). */
async function refreshCall(refreshToken: string): Promise<Tokens & { viewer: ViewerInfo }> {
  const res = await fetch(endpoint(), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ query: stringifyDocument(RefreshSessionDocument), variables: { t: refreshToken } }),
  });
  const body = (await res.json()) as { data?: { refreshSession?: AuthPayloadShape }; errors?: { message: string; extensions?: { code?: string } }[] };
  const p = body.data?.refreshSession;
  if (!p) {
    const err = body.errors?.[0];
    if (err?.extensions?.code === 'UNAUTHENTICATED') throw new SessionExpiredError();
    throw new Error(err?.message ?? `refresh failed (${res.status})`);
  }
  return { accessToken: p.accessToken, refreshToken: p.refreshToken, expiresAt: p.expiresAt, viewer: viewerOf(p) };
}

export const session = new Session({
  refresh: refreshCall,
  storage: window.localStorage,
  lock: browserLock(),
  setTimer: (fn, ms) => window.setTimeout(fn, ms),
  clearTimer: (t) => window.clearTimeout(t as number),
});

// Logging out in one tab logs out the others.
window.addEventListener('storage', (e) => {
  if (e.key === REFRESH_KEY && e.newValue === null && session.peek()) session.clear();
});

// A reloaded page has a refresh token but no access token: get one at once, while the app's
// first render and its queries are being prepared.
if (session.canResume) session.renew().catch(() => undefined);

// Tests read how many renewals the page made.
(window as unknown as { __agentrySession: Session }).__agentrySession = session;

let ws: WSClient | null = null;

function wsClient(): WSClient {
  if (ws) return ws;
  ws = createWSClient({
    url: wsEndpoint(),
    lazy: true,
    keepAlive: 20_000,
    retryAttempts: Infinity,
    shouldRetry: () => true,
    retryWait: async (retries) => {
      await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** retries, 5_000)));
    },
    connectionParams: async () => {
      const token = await session.token();
      return token ? { authorization: `Bearer ${token}` } : {};
    },
  });
  return ws;
}

function auth(): Exchange {
  return authExchange(async (utils) => ({
    addAuthToOperation(operation) {
      const token = session.peek();
      if (!token) return operation;
      return utils.appendHeaders(operation, { Authorization: `Bearer ${token}` });
    },
    willAuthError() {
      return session.canResume && session.expiresSoon();
    },
    didAuthError(error) {
      return error.graphQLErrors.some((e) => e.extensions?.code === 'UNAUTHENTICATED') || error.response?.status === 401;
    },
    async refreshAuth() {
      try {
        await session.renew();
      } catch {
        // The session is over: the app shows the login page (session.onChange).
      }
    },
  }));
}

export function makeClient(): Client {
  return new Client({
    url: endpoint(),
    exchanges: [
      cacheExchange,
      auth(),
      fetchExchange,
      subscriptionExchange({
        forwardSubscription(request) {
          const input = { ...request, query: request.query || '' };
          return {
            subscribe(sink) {
              const unsubscribe = wsClient().subscribe(input, sink);
              return { unsubscribe };
            },
          };
        },
      }),
    ],
    requestPolicy: 'cache-and-network',
  });
}

/** Closes the WebSocket (log out, tenant switch): the next subscription reconnects afresh. */
export function resetSocket() {
  ws?.dispose();
  ws = null;
}
