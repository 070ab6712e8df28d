package graph_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

func TestSignUpAndViewer(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{})
	s := env.SignUp(t, "ada@example.com", "Acme")
	res := env.Do(t, s.AccessToken, `{ viewer { user { id email } tenant { id name } role } }`, nil)
	var out struct {
		Viewer struct {
			User   struct{ ID, Email string }
			Tenant struct{ ID, Name string }
			Role   string
		}
	}
	res.Decode(t, &out)
	require.Equal(t, "ada@example.com", out.Viewer.User.Email)
	require.Equal(t, "Acme", out.Viewer.Tenant.Name)
	require.Equal(t, "OWNER", out.Viewer.Role)
	require.Equal(t, s.UserID, out.Viewer.User.ID)

	// Without a token the viewer is UNAUTHENTICATED.
	res = env.Do(t, "", `{ viewer { role } }`, nil)
	require.Equal(t, "UNAUTHENTICATED", res.Code())
}
