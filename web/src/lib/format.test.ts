import { describe, expect, it } from 'vitest';
import { globalIDOf, uuidOf } from './format';

describe('uuidOf', () => {
  it('reads the UUID of a global id and keeps a bare UUID', () => {
    const u = '01a219c4-6d9d-7a26-acee-3e4b052e5a75';
    const global = btoa(`Message:${u}`).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    expect(uuidOf(global)).toBe(u);
    expect(uuidOf(u.toUpperCase())).toBe(u);
    expect(uuidOf('not-an-id')).toBe('not-an-id');
  });
});

describe('globalIDOf', () => {
  it('encodes a bare UUID and keeps a global id', () => {
    const u = '01a219c4-6d9d-7a26-acee-3e4b052e5a75';
    const g = globalIDOf('Tenant', ` ${u.toUpperCase()} `);
    expect(atob(g.replace(/-/g, '+').replace(/_/g, '/'))).toBe(`Tenant:${u}`);
    expect(uuidOf(g)).toBe(u);
    expect(globalIDOf('Tenant', g)).toBe(g);
  });
});
