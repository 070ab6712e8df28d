package graph_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

const (
	emailReset        = `mutation($e: String!) { requestPasswordReset(email: $e) }`
	emailResetWith    = `mutation($t: String!, $p: String!) { resetPassword(token: $t, newPassword: $p) }`
	emailVerify       = `mutation($t: String!) { verifyEmail(token: $t) }`
	emailVerifiedQ    = `{ viewer { emailVerified } }`
	emailResend       = `mutation { requestEmailVerification }`
	emailNewPassword  = "a brand new passphrase"
	emailResetSubject = "Reset your agentry password"
)

func emailVerified(t *testing.T, env *apptest.Env, token string) bool {
	t.Helper()
	var out struct{ Viewer struct{ EmailVerified bool } }
	env.Do(t, token, emailVerifiedQ, nil).Decode(t, &out)
	return out.Viewer.EmailVerified
}

// TestVerifyEmail: a new account is unverified; its verification link verifies it once; a
// forged or spent token is BAD_USER_INPUT; a new link can be asked for.
func TestVerifyEmail(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	email := fmt.Sprintf("verify-%d@example.com", time.Now().UnixNano())
	s := sessSignUp(t, env, email, "correct horse battery")
	require.False(t, emailVerified(t, env, s.AccessToken))

	res := env.Do(t, "", emailVerify, map[string]any{"t": "agv_forged"})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	res = env.Do(t, s.AccessToken, emailResend, nil)
	require.Empty(t, res.Errors, "%s", res.Body)
	first, second := env.LinkToken(t, email, "Verify your email", 1), env.LinkToken(t, email, "Verify your email", 2)
	require.NotEqual(t, first, second)

	res = env.Do(t, "", emailVerify, map[string]any{"t": second})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.True(t, emailVerified(t, env, s.AccessToken))
	res = env.Do(t, "", emailVerify, map[string]any{"t": second})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "a spent token worked again: %s", res.Body)
}

// TestPasswordReset: requestPasswordReset answers byte for byte the same for an unknown
// address (and sends it nothing): the answer is made before the address is looked up. The link sets a new password once, ends every session (HTTP and open streams) and
// the old password.
func TestPasswordReset(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	ws, sse := revokeStreams(t, env, s.AccessToken)

	unknown := fmt.Sprintf("nobody-%d@example.com", time.Now().UnixNano())
	known := env.Do(t, "", emailReset, map[string]any{"e": s.Email})
	missing := env.Do(t, "", emailReset, map[string]any{"e": unknown})
	require.Equal(t, string(known.Body), string(missing.Body), "the answers tell the addresses apart")
	require.Equal(t, `{"data":{"requestPasswordReset":true}}`, string(known.Body))
	token := env.LinkToken(t, s.Email, emailResetSubject, 1)
	require.Empty(t, env.Mail.Sent(unknown), "an unknown address got an email")

	res := env.Do(t, "", emailResetWith, map[string]any{"t": "agp_forged", "p": emailNewPassword})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	res = env.Do(t, "", emailResetWith, map[string]any{"t": token, "p": "short"})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	require.Equal(t, "newPassword", res.Errors[0].Extensions["field"], "%s", res.Body)

	res = env.Do(t, "", emailResetWith, map[string]any{"t": token, "p": emailNewPassword})
	require.Empty(t, res.Errors, "%s", res.Body)
	requireUnauthenticated401(t, env.Do(t, s.AccessToken, sessViewerRole, nil), "access token after a password reset")
	revokeRequireEnded(t, "password reset", ws, sse)
	require.Equal(t, "UNAUTHENTICATED", sessRefresh(t, env, s.RefreshToken).Code(), "refresh token after a password reset")
	require.Equal(t, "UNAUTHENTICATED", sessLogIn(t, env, s.Email, s.Password, "").Code(), "the old password")
	sessDecodeAuth(t, sessLogIn(t, env, s.Email, emailNewPassword, ""), "logIn")

	res = env.Do(t, "", emailResetWith, map[string]any{"t": token, "p": "yet another passphrase"})
	require.Equal(t, "BAD_USER_INPUT", res.Code(), "a reset link worked twice: %s", res.Body)
}

// TestLogInThrottledPerAccount: guesses at one account's password are limited per account,
// whatever the client (the per-IP limit is off here): once the account's burst is spent, even
// the right password is RATE_LIMITED, while other accounts log in; password-reset requests
// for the account draw on the same bucket.
func TestLogInThrottledPerAccount(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_RATE_LIMIT_ACCOUNT": "3/h burst 3"}})
	victim, other := env.SignUp(t, "", ""), env.SignUp(t, "", "")
	for i := range 3 {
		res := sessLogIn(t, env, victim.Email, fmt.Sprintf("guess number %d", i), "")
		require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)
	}
	res := sessLogIn(t, env, victim.Email, victim.Password, "")
	require.Equal(t, "RATE_LIMITED", res.Code(), "%s", res.Body)
	require.NotNil(t, res.Errors[0].Extensions["retryAfter"])
	res = env.Do(t, "", emailReset, map[string]any{"e": victim.Email})
	require.Equal(t, "RATE_LIMITED", res.Code(), "%s", res.Body)
	sessDecodeAuth(t, sessLogIn(t, env, other.Email, other.Password, ""), "logIn")
}

// TestMessageAuthor: a message stores and shows who wrote it.
func TestMessageAuthor(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	var conv struct{ CreateConversation struct{ ID string } }
	env.Do(t, s.AccessToken, `mutation { createConversation(input: {title: "t"}) { id } }`, nil).Decode(t, &conv)
	var sent struct {
		SendMessage struct {
			Message struct {
				Author struct{ ID, Email string }
			}
		}
	}
	env.Do(t, s.AccessToken, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, content: "hello"}) { message { author { id email } } } }`,
		map[string]any{"c": conv.CreateConversation.ID}).Decode(t, &sent)
	require.Equal(t, s.UserID, sent.SendMessage.Message.Author.ID)
	require.Equal(t, s.Email, sent.SendMessage.Message.Author.Email)
	var list struct {
		Conversation struct {
			Messages struct {
				Edges []struct {
					Node struct {
						Role   string
						Author *struct{ ID string }
					}
				}
			}
		}
	}
	env.Do(t, s.AccessToken, `query($c: ID!) { conversation(id: $c) { messages(first: 10) { edges { node { role author { id } } } } } }`,
		map[string]any{"c": conv.CreateConversation.ID}).Decode(t, &list)
	require.Len(t, list.Conversation.Messages.Edges, 1)
	require.NotNil(t, list.Conversation.Messages.Edges[0].Node.Author)
	require.Equal(t, s.UserID, list.Conversation.Messages.Edges[0].Node.Author.ID)
}
