import { useEffect, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { Link, useNavigate } from 'react-router';
import { useMutation, useQuery } from 'urql';
import { session } from '../lib/client';
import { errorText } from '../lib/errors';
import { AcceptInvitation, EmailVerified, RequestEmailVerification, RequestPasswordReset, ResetPassword, VerifyEmail } from '../lib/ops';

// The pages the links in agentry's emails open (verify-email, accept-invitation,
// reset-password) and the login page's "forgot password".

/** PENDING_INVITATION keeps an invitation's token while its reader logs in or signs up. */
export const PENDING_INVITATION = 'agentry.pendingInvitation';

function tokenParam(): string {
  return new URLSearchParams(window.location.search).get('token') ?? '';
}

function Card({ title, children }: { title: string; children: ReactNode }) {
  return (
    <div className="auth">
      <div className="card">
        <div className="brand" style={{ padding: 0, marginBottom: '1rem' }}>
          <span className="dot" /> agentry
        </div>
        <h1>{title}</h1>
        {children}
      </div>
    </div>
  );
}

function Back() {
  return (
    <p className="muted small" style={{ marginTop: '1rem' }}>
      <Link to="/">Back to agentry</Link>
    </p>
  );
}

/** VerifyEmailPage spends the token of a verification link once, on opening. */
export function VerifyEmailPage() {
  const [res, verify] = useMutation(VerifyEmail);
  const started = useRef(false);
  useEffect(() => {
    if (started.current) return;
    started.current = true;
    const token = tokenParam();
    if (token) void verify({ token });
  }, [verify]);
  return (
    <Card title="Verify your email">
      {!tokenParam() && <div className="error" role="alert">This link has no token: open the link from the email as it is.</div>}
      {res.fetching && <span className="spinner" />}
      {res.data?.verifyEmail && (
        <div className="success" role="status">
          Your email address is verified. You can now accept invitations sent to it.
        </div>
      )}
      {res.error && (
        <div className="error" role="alert">
          {errorText(res.error)}
        </div>
      )}
      <Back />
    </Card>
  );
}

/** ForgotPasswordPage asks for a reset link; the answer is the same whether or not the address has an account. */
export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [res, request] = useMutation(RequestPasswordReset);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await request({ email });
  };
  return (
    <Card title="Forgot your password?">
      {res.data?.requestPasswordReset ? (
        <div className="success" role="status">
          If an account uses {email}, a link to choose a new password is on its way. It works once, for an hour.
        </div>
      ) : (
        <form onSubmit={submit} aria-label="Request a password reset">
          <label>
            Email
            <input name="email" type="email" required value={email} onChange={(e) => setEmail(e.target.value)} autoComplete="email" />
          </label>
          {res.error && (
            <div className="error" role="alert">
              {errorText(res.error)}
            </div>
          )}
          <button className="primary" type="submit" disabled={res.fetching}>
            {res.fetching ? <span className="spinner" /> : 'Send me a link'}
          </button>
        </form>
      )}
      <p className="muted small" style={{ marginTop: '1rem' }}>
        <Link to="/login">Back to log in</Link>
      </p>
    </Card>
  );
}

/** ResetPasswordPage sets a new password with the token of a reset link. */
export function ResetPasswordPage() {
  const [password, setPassword] = useState('');
  const [localError, setLocalError] = useState<string | null>(null);
  const [res, reset] = useMutation(ResetPassword);
  const token = tokenParam();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setLocalError(null);
    if (password.length < 8) {
      setLocalError('Choose a password of at least 8 characters.');
      return;
    }
    const r = await reset({ token, newPassword: password });
    // Every session ended with the reset, this one included.
    if (r.data?.resetPassword && session.state.status !== 'anonymous') session.clear();
  };
  const err = localError ?? errorText(res.error);
  return (
    <Card title="Choose a new password">
      {res.data?.resetPassword ? (
        <div className="success" role="status">
          Your password is changed and every session was logged out. <Link to="/login">Log in</Link> with the new password.
        </div>
      ) : (
        <form onSubmit={submit} aria-label="Reset password">
          <label>
            New password
            <input name="password" type="password" required value={password} onChange={(e) => setPassword(e.target.value)} autoComplete="new-password" />
            <span className="hint">8 to 256 characters.</span>
          </label>
          {!token && <div className="error">This link has no token: open the link from the email as it is.</div>}
          {err && (
            <div className="error" role="alert">
              {err}
            </div>
          )}
          <button className="primary" type="submit" disabled={res.fetching || !token}>
            {res.fetching ? <span className="spinner" /> : 'Set password'}
          </button>
        </form>
      )}
    </Card>
  );
}

/** AcceptInvitationPage accepts an invitation as the signed-in person (verified email), or keeps the token while they log in or sign up. */
export function AcceptInvitationPage() {
  const token = tokenParam() || sessionStorage.getItem(PENDING_INVITATION) || '';
  const anonymous = session.state.status === 'anonymous';
  useEffect(() => {
    if (anonymous && token) sessionStorage.setItem(PENDING_INVITATION, token);
  }, [anonymous, token]);
  if (anonymous) {
    return (
      <Card title="Accept an invitation">
        <p>Log in, or create an account, with the address the invitation was sent to; you come back here afterwards.</p>
        <p className="muted small">
          <Link to="/login">Log in</Link> · <Link to="/signup">Create an account</Link>
        </p>
      </Card>
    );
  }
  return <AcceptSignedIn token={token} />;
}

function AcceptSignedIn({ token }: { token: string }) {
  const [verified] = useQuery({ query: EmailVerified, requestPolicy: 'network-only' });
  const [res, accept] = useMutation(AcceptInvitation);
  const [resend, doResend] = useMutation(RequestEmailVerification);
  const navigate = useNavigate();
  useEffect(() => sessionStorage.removeItem(PENDING_INVITATION), []);
  const isVerified = verified.data?.viewer.emailVerified;
  return (
    <Card title="Accept an invitation">
      {!token && <div className="error">This link has no token: open the link from the email as it is.</div>}
      {verified.fetching && <span className="spinner" />}
      {isVerified === false && (
        <>
          <p>Verify your email address first: open the link we sent when you signed up, then this invitation link again.</p>
          {resend.data?.requestEmailVerification ? (
            <div className="success" role="status">
              A new verification link is on its way.
            </div>
          ) : (
            <button type="button" onClick={() => void doResend({})} disabled={resend.fetching}>
              Send the verification link again
            </button>
          )}
        </>
      )}
      {isVerified && !res.data?.acceptInvitation && (
        <button className="primary" type="button" disabled={!token || res.fetching} onClick={() => void accept({ token })}>
          {res.fetching ? <span className="spinner" /> : 'Accept the invitation'}
        </button>
      )}
      {res.data?.acceptInvitation && (
        <div className="success" role="status">
          You joined. Switch to the organisation from the menu to work in it.{' '}
          <button type="button" onClick={() => navigate('/chat')}>
            Continue
          </button>
        </div>
      )}
      {(res.error || resend.error) && (
        <div className="error" role="alert">
          {errorText(res.error ?? resend.error)}
        </div>
      )}
    </Card>
  );
}
