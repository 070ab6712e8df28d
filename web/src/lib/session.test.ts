import { describe, expect, it } from 'vitest';
import { REFRESH_KEY, Session, SessionExpiredError, type KeyValueStore, type LockFn, type Tokens } from './session';

class MemoryStore implements KeyValueStore {
  m = new Map<string, string>();
  getItem(k: string) {
    return this.m.get(k) ?? null;
  }
  setItem(k: string, v: string) {
    this.m.set(k, v);
  }
  removeItem(k: string) {
    this.m.delete(k);
  }
}

/** A server that rotates refresh tokens and, like agentry's, revokes on reuse. */
function fakeServer(now: () => number) {
  let n = 0;
  const live = new Set<string>(['r0']);
  const calls: string[] = [];
  let release: (() => void) | null = null;
  let gate: Promise<void> | null = null;
  return {
    calls,
    hold() {
      gate = new Promise((r) => (release = r));
    },
    release() {
      release?.();
      gate = null;
    },
    async refresh(tok: string): Promise<Tokens> {
      calls.push(tok);
      if (gate) await gate;
      if (!live.has(tok)) {
        live.clear();
        throw new SessionExpiredError();
      }
      live.delete(tok);
      n++;
      const next = `r${n}`;
      live.add(next);
      return { accessToken: `a${n}`, refreshToken: next, expiresAt: new Date(now() + 60_000).toISOString() };
    },
  };
}

function mutex(): LockFn {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(_name: string, fn: () => Promise<T>) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
}

describe('Session token renewal', () => {
  it('returns the held token while it is fresh and renews when it is about to expire', async () => {
    let t = 1_000_000;
    const now = () => t;
    const srv = fakeServer(now);
    const store = new MemoryStore();
    const s = new Session({ refresh: (r) => srv.refresh(r), storage: store, now });
    s.start({ accessToken: 'a0', refreshToken: 'r0', expiresAt: new Date(t + 60_000).toISOString() });
    expect(await s.token()).toBe('a0');
    expect(srv.calls).toEqual([]);
    t += 58_000; // 2 s left: renew first
    expect(await s.token()).toBe('a1');
    expect(store.getItem(REFRESH_KEY)).toBe('r1');
  });

  it('makes one refresh call for many concurrent callers (single-flight)', async () => {
    let t = 1_000_000;
    const now = () => t;
    const srv = fakeServer(now);
    const s = new Session({ refresh: (r) => srv.refresh(r), storage: new MemoryStore(), now });
    s.start({ accessToken: 'a0', refreshToken: 'r0', expiresAt: new Date(t + 1_000).toISOString() });
    srv.hold();
    const all = Promise.all(Array.from({ length: 10 }, () => s.token()));
    srv.release();
    expect(await all).toEqual(Array(10).fill('a1'));
    expect(srv.calls).toEqual(['r0']);
    expect(s.canResume).toBe(true);
  });

  it('two tabs sharing storage both stay logged in: the second uses the token the first rotated', async () => {
    let t = 1_000_000;
    const now = () => t;
    const srv = fakeServer(now);
    const store = new MemoryStore();
    const lock = mutex();
    const tab1 = new Session({ refresh: (r) => srv.refresh(r), storage: store, now, lock });
    const tab2 = new Session({ refresh: (r) => srv.refresh(r), storage: store, now, lock });
    const start = { accessToken: 'a0', refreshToken: 'r0', expiresAt: new Date(t + 1_000).toISOString() };
    tab1.start(start);
    tab2.start(start);
    const [x, y] = await Promise.all([tab1.token(), tab2.token()]);
    expect(x).toBe('a1');
    expect(y).toBe('a2');
    expect(srv.calls).toEqual(['r0', 'r1']); // never the spent r0 twice: no reuse, no revocation
    expect(tab1.canResume && tab2.canResume).toBe(true);
  });

  it('renews ahead of expiry on its own', async () => {
    let t = 1_000_000;
    const now = () => t;
    const srv = fakeServer(now);
    const timers: { fn: () => void; ms: number }[] = [];
    const s = new Session({
      refresh: (r) => srv.refresh(r),
      storage: new MemoryStore(),
      now,
      setTimer: (fn, ms) => timers.push({ fn, ms }),
      clearTimer: () => undefined,
    });
    s.start({ accessToken: 'a0', refreshToken: 'r0', expiresAt: new Date(t + 20_000).toISOString() });
    expect(timers).toHaveLength(1);
    expect(timers[0].ms).toBe(15_000); // a quarter of the life left as margin
    t += 15_000;
    timers[0].fn();
    await s.renew();
    expect(s.peek()).toBe('a1');
    expect(s.renewals).toBe(1);
  });

  it('a refused refresh token ends the session', async () => {
    const t = 1_000_000;
    const now = () => t;
    const srv = fakeServer(now);
    const store = new MemoryStore();
    const s = new Session({ refresh: (r) => srv.refresh(r), storage: store, now });
    s.start({ accessToken: 'a0', refreshToken: 'stolen-and-spent', expiresAt: new Date(t - 1).toISOString() });
    const states: string[] = [];
    s.onChange((st) => states.push(st.status));
    expect(await s.token()).toBeNull();
    expect(s.canResume).toBe(false);
    expect(states).toEqual(['anonymous']);
  });
});
