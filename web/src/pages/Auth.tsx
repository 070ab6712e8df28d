import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { useMutation } from 'urql';
import { session } from '../lib/client';
import { viewerOf } from '../lib/client';
import { errorText } from '../lib/errors';
import { LogIn, SignUp } from '../lib/ops';
import { PENDING_INVITATION } from './Links';

export function AuthPage({ mode }: { mode: 'login' | 'signup' }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [name, setName] = useState('');
  const [tenantName, setTenantName] = useState('');
  const [tenantId, setTenantId] = useState('');
  const [login, doLogIn] = useMutation(LogIn);
  const [signup, doSignUp] = useMutation(SignUp);
  const [localError, setLocalError] = useState<string | null>(null);
  const navigate = useNavigate();
  const busy = login.fetching || signup.fetching;
  const err = localError ?? errorText(mode === 'login' ? login.error : signup.error);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setLocalError(null);
    if (mode === 'signup' && password.length < 8) {
      setLocalError('Choose a password of at least 8 characters.');
      return;
    }
    const res =
      mode === 'login'
        ? await doLogIn({ input: { email, password, tenantId: tenantId.trim() || null } })
        : await doSignUp({ input: { email, password, name: name || null, tenantName } });
    const p = mode === 'login' ? (res.data as { logIn?: Parameters<typeof viewerOf>[0] } | undefined)?.logIn : (res.data as { signUp?: Parameters<typeof viewerOf>[0] } | undefined)?.signUp;
    if (p) {
      session.start(p, viewerOf(p));
      // An invitation link opened before logging in is taken up again.
      const invitation = sessionStorage.getItem(PENDING_INVITATION);
      navigate(invitation ? `/accept-invitation?token=${encodeURIComponent(invitation)}` : '/chat');
    }
  };

  return (
    <div className="auth">
      <div className="card">
        <div className="brand" style={{ padding: 0, marginBottom: '1rem' }}>
          <span className="dot" /> agentry
        </div>
        <h1>{mode === 'login' ? 'Log in' : 'Create your account'}</h1>
        <form onSubmit={submit} aria-label={mode === 'login' ? 'Log in' : 'Sign up'}>
          {mode === 'signup' && (
            <label>
              Your name
              <input name="name" value={name} onChange={(e) => setName(e.target.value)} autoComplete="name" />
            </label>
          )}
          <label>
            Email
            <input name="email" type="email" required value={email} onChange={(e) => setEmail(e.target.value)} autoComplete="email" />
          </label>
          <label>
            Password
            <input
              name="password"
              type="password"
              required
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              autoComplete={mode === 'login' ? 'current-password' : 'new-password'}
            />
            {mode === 'signup' && <span className="hint">8 to 256 characters.</span>}
          </label>
          {mode === 'signup' ? (
            <>
              <label>
                Organisation
                <input name="tenantName" required value={tenantName} onChange={(e) => setTenantName(e.target.value)} placeholder="Acme Inc." />
              </label>
              <p className="muted small">We send a link to verify the address; accepting invitations needs it.</p>
            </>
          ) : (
            <details>
              <summary className="muted small">Log in to another organisation</summary>
              <label style={{ marginTop: '0.5rem' }}>
                Organisation id
                <input name="tenantId" value={tenantId} onChange={(e) => setTenantId(e.target.value)} placeholder="the first one you joined when empty" />
              </label>
            </details>
          )}
          {err && (
            <div className="error" role="alert">
              {err.replace(/^You are not logged in \((.*)\)\.$/, '$1')}
            </div>
          )}
          <button className="primary" type="submit" disabled={busy}>
            {busy ? <span className="spinner" /> : mode === 'login' ? 'Log in' : 'Sign up'}
          </button>
        </form>
        <p className="muted small" style={{ marginTop: '1rem' }}>
          {mode === 'login' ? (
            <>
              <Link to="/forgot-password">Forgot your password?</Link> · New here? <Link to="/signup">Create an account</Link>
            </>
          ) : (
            <>
              Already have an account? <Link to="/login">Log in</Link>
            </>
          )}
        </p>
      </div>
    </div>
  );
}
