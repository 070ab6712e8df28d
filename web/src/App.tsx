import { Suspense, lazy, useEffect, useMemo, useState, useSyncExternalStore } from 'react';
import { NavLink, Navigate, Route, Routes, useLocation, useNavigate } from 'react-router';
import { Provider, useMutation, useQuery } from 'urql';
import { makeClient, resetSocket, session, viewerOf } from './lib/client';
import { LogOut, Memberships, SwitchTenant } from './lib/ops';
import { browserLock, exchange } from './lib/session';
import { errorText } from './lib/errors';
import { AuthPage } from './pages/Auth';
import { AcceptInvitationPage, ForgotPasswordPage, ResetPasswordPage, VerifyEmailPage } from './pages/Links';
import { ChatPage } from './pages/Chat';
import { REFRESH_KEY, type SessionState } from './lib/session';

const RunsPage = lazy(() => import('./pages/Runs').then((m) => ({ default: m.RunsPage })));
const RunPage = lazy(() => import('./pages/Runs').then((m) => ({ default: m.RunPage })));
const RoutinesPage = lazy(() => import('./pages/Routines').then((m) => ({ default: m.RoutinesPage })));
const TasksPage = lazy(() => import('./pages/Tasks').then((m) => ({ default: m.TasksPage })));
const WorkspacePage = lazy(() => import('./pages/Workspace').then((m) => ({ default: m.WorkspacePage })));
const SettingsPage = lazy(() => import('./pages/Settings').then((m) => ({ default: m.SettingsPage })));
const UsagePage = lazy(() => import('./pages/Usage').then((m) => ({ default: m.UsagePage })));
const AdminPage = lazy(() => import('./pages/Admin').then((m) => ({ default: m.AdminPage })));
const WebhooksPage = lazy(() => import('./pages/Webhooks').then((m) => ({ default: m.WebhooksPage })));

let cached: SessionState = session.state;
function subscribe(fn: () => void) {
  return session.onChange((s) => {
    cached = s;
    fn();
  });
}
function useSession(): SessionState {
  return useSyncExternalStore(subscribe, () => cached);
}

export function App() {
  const s = useSession();
  const tenantId = s.status === 'active' ? s.viewer?.tenantId : undefined;
  // A new client (empty cache, new socket) per tenant session: nothing of one session leaks into the next.
  const client = useMemo(() => {
    resetSocket();
    return makeClient();
  }, [s.status, tenantId]); // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <Provider value={client}>
      {s.status === 'anonymous' ? (
        <Routes>
          <Route path="/signup" element={<AuthPage mode="signup" />} />
          <Route path="/verify-email" element={<VerifyEmailPage />} />
          <Route path="/reset-password" element={<ResetPasswordPage />} />
          <Route path="/forgot-password" element={<ForgotPasswordPage />} />
          <Route path="/accept-invitation" element={<AcceptInvitationPage />} />
          <Route path="*" element={<AuthPage mode="login" />} />
        </Routes>
      ) : (
        <Shell />
      )}
    </Provider>
  );
}

function Shell() {
  const v = session.viewer;
  const [menu, setMenu] = useState(false);
  const loc = useLocation();
  const navigate = useNavigate();
  const [, logOut] = useMutation(LogOut);
  useEffect(() => setMenu(false), [loc.pathname]);
  const admin = v?.role === 'OWNER' || v?.role === 'ADMIN';
  const doLogOut = async () => {
    const t = window.localStorage.getItem(REFRESH_KEY);
    if (t) await logOut({ t });
    session.clear();
    navigate('/login');
  };
  return (
    <div className={`layout${menu ? ' menu-open' : ''}`}>
      <header className="topbar">
        <button className="small" aria-label="Menu" onClick={() => setMenu(!menu)}>
          ☰
        </button>
        <span className="brand">
          <span className="dot" /> agentry
        </span>
      </header>
      <aside className="sidebar">
        <div className="brand">
          <span className="dot" /> agentry
        </div>
        <nav className="nav">
          <NavLink to="/chat">Chat</NavLink>
          <NavLink to="/runs">Runs</NavLink>
          <NavLink to="/tasks">Tasks</NavLink>
          <NavLink to="/routines">Routines</NavLink>
          <NavLink to="/workspace">Workspace</NavLink>
          <NavLink to="/usage">{admin ? 'Usage & budgets' : 'Usage'}</NavLink>
          <NavLink to="/settings">Settings</NavLink>
          {admin && <NavLink to="/webhooks">Webhooks</NavLink>}
          {v?.platformAdmin && <NavLink to="/admin">Platform admin</NavLink>}
        </nav>
        <div className="who">
          <div title={v?.email}>{v?.name || v?.email}</div>
          <TenantSwitcher />
          <div>
            {v?.tenantName} · {v?.role?.toLowerCase()}
          </div>
          <button className="link small" onClick={doLogOut}>
            Log out
          </button>
        </div>
      </aside>
      <main className="main">
        <Suspense
          fallback={
            <div className="page">
              <span className="spinner" /> Loading…
            </div>
          }
        >
          <Routes>
            <Route path="/" element={<Navigate to="/chat" replace />} />
            <Route path="/login" element={<Navigate to="/chat" replace />} />
            <Route path="/signup" element={<Navigate to="/chat" replace />} />
            <Route path="/verify-email" element={<VerifyEmailPage />} />
            <Route path="/reset-password" element={<ResetPasswordPage />} />
            <Route path="/accept-invitation" element={<AcceptInvitationPage />} />
            <Route path="/chat" element={<ChatPage />} />
            <Route path="/chat/:id" element={<ChatPage />} />
            <Route path="/runs" element={<RunsPage />} />
            <Route path="/runs/:id" element={<RunPage />} />
            <Route path="/tasks" element={<TasksPage />} />
            <Route path="/routines" element={<RoutinesPage />} />
            <Route path="/workspace" element={<WorkspacePage />} />
            <Route path="/settings" element={<SettingsPage />} />
            <Route path="/usage" element={<UsagePage />} />
            <Route path="/admin" element={<AdminPage />} />
            <Route path="/webhooks" element={<WebhooksPage />} />
            <Route path="*" element={<NotFound />} />
          </Routes>
        </Suspense>
      </main>
    </div>
  );
}

function NotFound() {
  return (
    <div className="page">
      <div className="empty">
        <strong>This page does not exist.</strong>
        <NavLink to="/chat">Go to your conversations</NavLink>
      </div>
    </div>
  );
}

/** The tenants the person has joined; choosing one switches the session to it. */
function TenantSwitcher() {
  const [q] = useQuery({ query: Memberships });
  const [res, switchTenant] = useMutation(SwitchTenant);
  const navigate = useNavigate();
  const joined = (q.data?.viewer.memberships ?? []).filter((m) => !m.pending);
  if (joined.length < 2) return null;
  const current = session.viewer?.tenantId ?? '';
  return (
    <label style={{ marginBottom: '0.35rem' }}>
      Organisation
      <select
        aria-label="Organisation"
        value={current}
        disabled={res.fetching}
        onChange={async (e) => {
          const tenantId = e.target.value;
          await exchange(session, browserLock(), window.localStorage, async (t) => {
            const r = await switchTenant({ t, tenantId });
            const p = r.data?.switchTenant;
            return p ? { ...p, viewer: viewerOf(p) } : null;
          });
          navigate('/chat');
        }}
      >
        {joined.map((m) => (
          <option key={m.tenant.id} value={m.tenant.id}>
            {m.tenant.name} ({m.role.toLowerCase()})
          </option>
        ))}
      </select>
      {res.error && <span className="field-error">{errorText(res.error)}</span>}
    </label>
  );
}
