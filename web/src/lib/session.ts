// The session: the access token lives in memory only; the refresh token is kept in
// localStorage so a reload (or another tab) can renew it. Renewal is single-flight: within a
// tab one promise serves every caller, and across tabs a Web Lock serialises renewals, each
// reading the newest refresh token under the lock (another tab may have rotated it).

export interface Tokens {
  accessToken: string;
  refreshToken: string;
  expiresAt: string;
}

export interface ViewerInfo {
  userId: string;
  email: string;
  name?: string | null;
  tenantId: string;
  tenantName: string;
  role: string;
  platformAdmin: boolean;
}

/** An error from the refresh call that means the refresh token is no longer good. */
export class SessionExpiredError extends Error {
  constructor(message = 'Your session has ended. Log in again.') {
    super(message);
    this.name = 'SessionExpiredError';
  }
}

export interface KeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export type LockFn = <T>(name: string, fn: () => Promise<T>) => Promise<T>;

export interface SessionOptions {
  /** Spends a refresh token; throws SessionExpiredError when the server refuses it. */
  refresh: (refreshToken: string) => Promise<Tokens & { viewer?: ViewerInfo }>;
  storage: KeyValueStore;
  /** Cross-tab mutual exclusion (navigator.locks); default: none. */
  lock?: LockFn;
  now?: () => number;
  /** Timers for the renewal ahead of expiry; tests pass fakes. */
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (t: unknown) => void;
}

export const REFRESH_KEY = 'agentry.refreshToken';
export const VIEWER_KEY = 'agentry.viewer';

export type SessionState = { status: 'anonymous' } | { status: 'active'; viewer: ViewerInfo | null };

export class Session {
  private access: string | null = null;
  private expiresAt = 0;
  private inflight: Promise<string> | null = null;
  private timer: unknown = null;
  private listeners = new Set<(s: SessionState) => void>();
  private viewerInfo: ViewerInfo | null = null;
  /** How many renewals this tab made (shown in tests through the page). */
  renewals = 0;

  constructor(private readonly o: SessionOptions) {
    const v = o.storage.getItem(VIEWER_KEY);
    if (v && o.storage.getItem(REFRESH_KEY)) {
      try {
        this.viewerInfo = JSON.parse(v) as ViewerInfo;
      } catch {
        this.viewerInfo = null;
      }
    }
  }

  private now() {
    return this.o.now ? this.o.now() : Date.now();
  }

  /** True when a refresh token is stored: the session can be resumed. */
  get canResume(): boolean {
    return this.o.storage.getItem(REFRESH_KEY) !== null;
  }

  get viewer(): ViewerInfo | null {
    return this.viewerInfo;
  }

  get state(): SessionState {
    return this.canResume ? { status: 'active', viewer: this.viewerInfo } : { status: 'anonymous' };
  }

  onChange(fn: (s: SessionState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private emit() {
    const s = this.state;
    for (const l of this.listeners) l(s);
  }

  /** Starts a session from a sign-up, log-in or refresh answer. */
  start(t: Tokens, viewer?: ViewerInfo) {
    this.access = t.accessToken;
    this.expiresAt = Date.parse(t.expiresAt);
    this.o.storage.setItem(REFRESH_KEY, t.refreshToken);
    if (viewer) {
      this.viewerInfo = viewer;
      this.o.storage.setItem(VIEWER_KEY, JSON.stringify(viewer));
    }
    this.schedule();
    this.emit();
  }

  /** Ends the session locally (logOut on the server is the caller's). */
  clear() {
    this.access = null;
    this.expiresAt = 0;
    this.viewerInfo = null;
    this.o.storage.removeItem(REFRESH_KEY);
    this.o.storage.removeItem(VIEWER_KEY);
    if (this.timer !== null) this.o.clearTimer?.(this.timer);
    this.timer = null;
    this.emit();
  }

  /** The margin before expiry at which a token is renewed: a quarter of its life, at most a minute. */
  private margin(): number {
    return 60_000;
  }

  private schedule() {
    if (!this.o.setTimer) return;
    if (this.timer !== null) this.o.clearTimer?.(this.timer);
    const life = this.expiresAt - this.now();
    const margin = Math.min(this.margin(), life / 4);
    this.timer = this.o.setTimer(() => {
      this.timer = null;
      this.renew().catch(() => undefined);
    }, Math.max(0, life - margin));
  }

  /** A valid access token, renewed first when it expires soon; null when logged out. */
  async token(): Promise<string | null> {
    if (this.access && this.expiresAt - this.now() > Math.min(this.margin(), 5_000)) return this.access;
    if (!this.canResume) return null;
    try {
      return await this.renew();
    } catch (e) {
      if (e instanceof SessionExpiredError) return null;
      throw e;
    }
  }

  /** The access token held now, without renewing (may be expired or null). */
  peek(): string | null {
    return this.access;
  }

  /** True when the held token expires within the margin (or there is none). */
  expiresSoon(): boolean {
    return !this.access || this.expiresAt - this.now() <= Math.min(this.margin(), 5_000);
  }

  /**
   * Renews the token pair. Concurrent callers share one renewal; across tabs the lock makes
   * renewals take turns, each with the newest stored refresh token.
   */
  renew(): Promise<string> {
    if (this.inflight) return this.inflight;
    const held = this.o.storage.getItem(REFRESH_KEY);
    const run = async () => {
      const stored = this.o.storage.getItem(REFRESH_KEY);
      if (!stored) throw new SessionExpiredError();
      if (stored !== held && this.access && this.expiresAt - this.now() > 5_000) {
        // Another tab renewed while this one waited, and this tab's token is still good.
        return this.access;
      }
      try {
        const t = await this.o.refresh(stored);
        this.renewals++;
        this.start(t, t.viewer);
        return t.accessToken;
      } catch (e) {
        if (e instanceof SessionExpiredError) {
          // Another tab may have rotated the token meanwhile: only a refusal of the newest one ends the session.
          if (this.o.storage.getItem(REFRESH_KEY) === stored) this.clear();
        }
        throw e;
      }
    };
    const p = (this.o.lock ? this.o.lock('agentry-refresh', run) : run()).finally(() => {
      if (this.inflight === p) this.inflight = null;
    });
    this.inflight = p;
    return p;
  }
}

/**
 * Spends the stored refresh token with fn (switching tenant) under the same lock as renewals,
 * and starts the session it answers.
 */
export async function exchange(s: Session, lock: LockFn | undefined, storage: KeyValueStore, fn: (refreshToken: string) => Promise<(Tokens & { viewer: ViewerInfo }) | null>) {
  const run = async () => {
    const rt = storage.getItem(REFRESH_KEY);
    if (!rt) throw new SessionExpiredError();
    const t = await fn(rt);
    if (t) s.start(t, t.viewer);
    return t;
  };
  return lock ? lock('agentry-refresh', run) : run();
}

/** navigator.locks when the browser has it. */
export function browserLock(): LockFn | undefined {
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  if (!locks) return undefined;
  return (name, fn) => locks.request(name, fn) as ReturnType<typeof fn>;
}
