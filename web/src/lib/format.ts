export function money(micros: number | null | undefined): string {
  const v = (micros ?? 0) / 1_000_000;
  if (v === 0) return '$0';
  if (v < 0.01) return `$${v.toFixed(4)}`;
  return `$${v.toFixed(2)}`;
}

export function tokens(n: number | null | undefined): string {
  const v = n ?? 0;
  if (v >= 1_000_000) return `${(v / 1_000_000).toFixed(1)}M`;
  if (v >= 10_000) return `${(v / 1000).toFixed(1)}k`;
  return v.toLocaleString('en-US');
}

export function time(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

export function dateTime(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false });
}

export function duration(from?: string | null, to?: string | null): string {
  if (!from) return '';
  const ms = (to ? Date.parse(to) : Date.now()) - Date.parse(from);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function shortId(id: string): string {
  return id.length > 10 ? id.slice(-8) : id;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The UUID inside an id: event data names objects by UUID or by global id (base64url of
 * "Type:uuid"), so the two are compared by this.
 */
export function uuidOf(id: string): string {
  if (UUID.test(id)) return id.toLowerCase();
  try {
    const s = atob(id.replace(/-/g, '+').replace(/_/g, '/'));
    const u = s.slice(s.indexOf(':') + 1);
    return UUID.test(u) ? u.toLowerCase() : id;
  } catch {
    return id;
  }
}

/** The global id of type for id: a bare UUID is encoded (base64url of "Type:uuid"), anything else is kept. */
export function globalIDOf(type: string, id: string): string {
  const v = id.trim();
  if (!UUID.test(v)) return v;
  return btoa(`${type}:${v.toLowerCase()}`).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
