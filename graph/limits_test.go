package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/graph"
	"github.com/agentry/agentry/internal/app/apptest"
)

// The GraphQL edge's limits (ARCHITECTURE.md, quality bars): depth, alias, token and fragment-expansion
// limits reject an operation before any resolver runs; the body size is capped; mutations are
// POST-only; production has no introspection and no field suggestions; every error carries
// extensions.code.

const limitsPassword = "correct horse battery staple"

// limitsSignUpMutation returns a mutation that signs up one user per email, each under its own
// alias (a0, a1, ...), selecting sel. If it ran, the users would exist.
func limitsSignUpMutation(emails []string, sel string) string {
	var b strings.Builder
	b.WriteString("mutation($p: String!) {")
	for i, e := range emails {
		fmt.Fprintf(&b, "a%d:signUp(input:{email:%q,password:$p,tenantName:\"t\"})%s ", i, e, sel)
	}
	b.WriteString("}")
	return b.String()
}

func limitsEmails(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d@x.io", prefix, i)
	}
	return out
}

// limitsPrefix is a unique email prefix, so a test can count the users it may have created.
func limitsPrefix(name string) string {
	return fmt.Sprintf("lim-%s-%d-", name, time.Now().UnixNano())
}

// limitsUsers counts the users whose email starts with prefix, straight from the database.
func limitsUsers(t *testing.T, env *apptest.Env, prefix string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.OwnerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM users WHERE email LIKE $1 || '%'`, prefix).Scan(&n))
	return n
}

// limitsCanLogIn reports whether email can log in with limitsPassword (whether signUp ran).
func limitsCanLogIn(t *testing.T, env *apptest.Env, email string) bool {
	t.Helper()
	res := env.Do(t, "", `mutation($in: LogInInput!) { logIn(input: $in) { accessToken } }`,
		map[string]any{"in": map[string]any{"email": email, "password": limitsPassword}})
	if len(res.Errors) == 0 {
		return true
	}
	require.Equal(t, "UNAUTHENTICATED", res.Code(), "%s", res.Body)
	return false
}

// limitsPost posts a GraphQL operation to url (a handler outside apptest's server).
func limitsPost(t *testing.T, url, query string, vars map[string]any) *apptest.Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	res, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := &apptest.Response{Status: res.StatusCode, Body: raw}
	require.NoError(t, json.Unmarshal(raw, out), "body: %s", raw)
	return out
}

// requireRejected checks an answer is an error with a code and no data.
func requireRejected(t *testing.T, res *apptest.Response, code, msgPart string) {
	t.Helper()
	require.NotEmpty(t, res.Errors, "%s", res.Body)
	require.Equal(t, code, res.Code(), "%s", res.Body)
	require.Contains(t, res.Errors[0].Message, msgPart, "%s", res.Body)
	require.True(t, len(res.Data) == 0 || string(res.Data) == "null", "no data expected: %s", res.Body)
}

// deepTypeQuery nests n ofType selections under __type: the schema's own types are at most four
// levels deep, but introspection's __Type.ofType recurses.
func deepTypeQuery(n int) string {
	return `{ __type(name: "Query") ` + strings.Repeat("{ ofType ", n) + "{ name }" + strings.Repeat("}", n) + " }"
}

// withViewer adds viewer { role } to an operation's root fields.
func withViewer(q string) string { return "{ viewer { role } " + strings.TrimPrefix(q, "{") }

func TestLimitsDepth(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"development", "production"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_ENV": mode}})

			// 49 ofType under __type, plus __type and name: 51 levels. Beside another root field
			// (viewer), the operation is not introspection only.
			res := env.Do(t, "", withViewer(deepTypeQuery(49)), nil)
			requireRejected(t, res, "BAD_USER_INPUT", "nested 51 levels deep; the limit is 12")

			// Fragments do not hide depth: 50 fragments each nesting the next (__type, 50 ofType
			// and name: 52 levels).
			var b strings.Builder
			b.WriteString(`{ viewer { role } __type(name: "Query") { ...F0 } }` + "\n")
			for i := range 50 {
				fmt.Fprintf(&b, "fragment F%d on __Type { ofType { ...F%d } }\n", i, i+1)
			}
			b.WriteString("fragment F50 on __Type { name }\n")
			res = env.Do(t, "", b.String(), nil)
			requireRejected(t, res, "BAD_USER_INPUT", "nested 52 levels deep")

			// Nor do inline fragments (they add no level, and the fields inside them are counted).
			q := `{ __type(name: "Query") ` + strings.Repeat("{ ... on __Type { ofType ", 20) + "{ name }" + strings.Repeat("} }", 20) + " }"
			res = env.Do(t, "", withViewer(q), nil)
			requireRejected(t, res, "BAD_USER_INPUT", "nested 22 levels deep")

			// Introspection alone is exempt from the depth limit (production refuses it as
			// introspection).
			res = env.Do(t, "", deepTypeQuery(49), nil)
			if mode == "development" {
				require.Empty(t, res.Errors, "%s", res.Body)
			} else {
				require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
			}

			// At the limit the same query is answered (in development; production refuses
			// introspection, with a clear error).
			res = env.Do(t, "", deepTypeQuery(10), nil)
			if mode == "development" {
				require.Empty(t, res.Errors, "%s", res.Body)
			} else {
				require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
			}
		})
	}
}

// limitsServer serves a GraphQL handler with other limits over env's services (development).
func limitsServer(t *testing.T, env *apptest.Env, l graph.Limits) *httptest.Server {
	t.Helper()
	a := env.App
	srv := httptest.NewServer(graph.NewHandler(graph.HandlerOptions{
		Resolver:    &graph.Resolver{Auth: a.Auth, Tenancy: a.Tenancy, Settings: a.Settings, Log: a.Log},
		Development: true,
		Limits:      l,
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLimitsDepthBeforeResolvers proves the depth limit acts before any resolver: the schema
// cannot nest a mutation 50 levels, so this uses a handler with a depth limit of 3 over the real
// services, and a signUp that would create a user if it ran.
func TestLimitsDepthBeforeResolvers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	srv := limitsServer(t, env, graph.Limits{MaxDepth: 3})
	prefix := limitsPrefix("depth")
	vars := map[string]any{"p": limitsPassword}

	// Four levels (signUp, viewer, user, id): rejected, and no user was created.
	res := limitsPost(t, srv.URL, limitsSignUpMutation([]string{prefix + "deep@x.io"}, "{viewer{user{id}}}"), vars)
	requireRejected(t, res, "BAD_USER_INPUT", "nested 4 levels deep; the limit is 3")
	require.Equal(t, 0, limitsUsers(t, env, prefix))
	require.False(t, limitsCanLogIn(t, env, prefix+"deep@x.io"))

	// Control: three levels run, and the user exists.
	res = limitsPost(t, srv.URL, limitsSignUpMutation([]string{prefix + "ok@x.io"}, "{viewer{role}}"), vars)
	require.Empty(t, res.Errors, "%s", res.Body)
	require.Equal(t, 1, limitsUsers(t, env, prefix))
	require.True(t, limitsCanLogIn(t, env, prefix+"ok@x.io"))
}

func TestLimitsAliases(t *testing.T) {
	t.Parallel()
	// 10,000 signUp aliases with distinct emails take about 1.1 MB: raise the body cap so the
	// request reaches the parser.
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_MAX_BODY_BYTES": "4194304"}})
	vars := map[string]any{"p": limitsPassword}

	t.Run("10000 signUp aliases hit the parser token limit", func(t *testing.T) {
		prefix := limitsPrefix("tok")
		emails := limitsEmails(prefix, 10000)
		q := limitsSignUpMutation(emails, "{accessToken}")
		require.Less(t, len(q), 4<<20)
		res := env.Do(t, "", q, vars)
		requireRejected(t, res, "GRAPHQL_PARSE_FAILED", "exceeded token limit of 2000 (requests without credentials; signed-in ones may have 10000)")
		require.Equal(t, http.StatusOK, res.Status, "GraphQL over HTTP: a document refused is 200 for application/json")
		// Signed in, the limit is higher.
		res = env.Do(t, env.SignUp(t, "", "").AccessToken, q, vars)
		requireRejected(t, res, "GRAPHQL_PARSE_FAILED", "exceeded token limit of 10000")
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, 0, limitsUsers(t, env, prefix))
		require.False(t, limitsCanLogIn(t, env, emails[0]))
	})

	t.Run("10000 __typename aliases hit the parser token limit", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("{")
		for i := range 10000 {
			fmt.Fprintf(&b, " a%d: __typename", i)
		}
		b.WriteString("}")
		res := env.Do(t, "", b.String(), nil)
		requireRejected(t, res, "GRAPHQL_PARSE_FAILED", "exceeded token limit of 2000")
	})

	t.Run("51 signUp aliases hit the alias limit before any resolver", func(t *testing.T) {
		prefix := limitsPrefix("alias")
		emails := limitsEmails(prefix, 51)
		res := env.Do(t, "", limitsSignUpMutation(emails, "{accessToken}"), vars)
		requireRejected(t, res, "BAD_USER_INPUT", "operation uses 51 aliases; the limit is 50")
		require.Equal(t, 0, limitsUsers(t, env, prefix))
		require.False(t, limitsCanLogIn(t, env, emails[0]))
		require.False(t, limitsCanLogIn(t, env, emails[50]))
	})

	t.Run("aliases in a fragment count at every spread", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("{ ...A ...A2 }\nfragment A on Query {")
		for i := range 30 {
			fmt.Fprintf(&b, " x%d: __typename", i)
		}
		b.WriteString(" }\nfragment A2 on Query { ...A }\n")
		res := env.Do(t, "", b.String(), nil)
		requireRejected(t, res, "BAD_USER_INPUT", "operation uses 60 aliases; the limit is 50")
	})

	t.Run("50 aliases are allowed", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("{")
		for i := range 50 {
			fmt.Fprintf(&b, " a%d: __typename", i)
		}
		b.WriteString("}")
		res := env.Do(t, "", b.String(), nil)
		require.Empty(t, res.Errors, "%s", res.Body)
	})
}

// TestLimitsFragmentExpansion: 40 fragments that each spread the next twice expand to 2^40
// fields from a few hundred bytes. The operation must be refused at once, not walked.
func TestLimitsFragmentExpansion(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	const n = 40
	for i := range n {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { __typename }\n", n)
	body, err := json.Marshal(map[string]any{"query": b.String()})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	res := env.Raw(t, req)
	requireRejected(t, res, "BAD_USER_INPUT", "fields once its fragments are spread")
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestLimitsBodySize(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	// A valid request padded to size with an ignored JSON member.
	padded := func(size int) []byte {
		head := `{"query":"{ __typename }","pad":"`
		return []byte(head + strings.Repeat("a", size-len(head)-2) + `"}`)
	}
	post := func(body io.Reader) *apptest.Response {
		req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		return env.Raw(t, req)
	}
	requireTooLarge := func(res *apptest.Response) {
		t.Helper()
		require.Equal(t, http.StatusRequestEntityTooLarge, res.Status, "%s", res.Body)
		requireRejected(t, res, "BAD_USER_INPUT", "request body exceeds the limit of 1048576 bytes")
	}

	t.Run("2 MB with Content-Length", func(t *testing.T) {
		requireTooLarge(post(bytes.NewReader(padded(2 << 20))))
	})
	t.Run("2 MB chunked", func(t *testing.T) {
		// io.MultiReader hides the length: the request goes out chunked, without Content-Length.
		requireTooLarge(post(io.MultiReader(bytes.NewReader(padded(2 << 20)))))
	})
	t.Run("just over the limit, chunked", func(t *testing.T) {
		requireTooLarge(post(io.MultiReader(bytes.NewReader(padded(1<<20 + 1)))))
	})
	t.Run("under the limit is served", func(t *testing.T) {
		res := post(io.MultiReader(bytes.NewReader(padded(1<<20 - 1))))
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.JSONEq(t, `{"__typename":"Query"}`, string(res.Data))
	})
}

func TestLimitsMutationOverGET(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	get := func(params url.Values) *apptest.Response {
		req, err := http.NewRequest(http.MethodGet, env.Server.URL+"/graphql?"+params.Encode(), nil)
		require.NoError(t, err)
		return env.Raw(t, req)
	}
	requireRefused := func(res *apptest.Response) {
		t.Helper()
		require.GreaterOrEqual(t, res.Status, 400, "%s", res.Body)
		require.NotEmpty(t, res.Errors, "%s", res.Body)
		require.Contains(t, res.Errors[0].Message, "GET requests only allow query operations")
		require.True(t, len(res.Data) == 0 || string(res.Data) == "null", "%s", res.Body)
		if res.Code() == "" {
			t.Logf("note: the GET refusal carries no extensions.code (gqlgen writes it directly): %s", res.Body)
		}
	}

	// The literal attack.
	requireRefused(get(url.Values{"query": {`mutation{logOut(refreshToken:"x")}`}}))

	// With a live refresh token: if logOut ran, the token would be revoked.
	s := env.SignUp(t, "", "")
	requireRefused(get(url.Values{"query": {fmt.Sprintf(`mutation{logOut(refreshToken:%q)}`, s.RefreshToken)}}))
	// Hiding the mutation behind a query in the same document does not help.
	requireRefused(get(url.Values{
		"query":         {fmt.Sprintf(`query Q { __typename } mutation M { logOut(refreshToken:%q) }`, s.RefreshToken)},
		"operationName": {"M"},
	}))
	res := env.Do(t, "", `mutation($t: String!) { refreshSession(refreshToken: $t) { accessToken } }`, map[string]any{"t": s.RefreshToken})
	require.Empty(t, res.Errors, "logOut must not have run: %s", res.Body)

	// signUp over GET creates nobody.
	prefix := limitsPrefix("get")
	requireRefused(get(url.Values{
		"query":     {limitsSignUpMutation([]string{prefix + "0@x.io"}, "{accessToken}")},
		"variables": {`{"p":"` + limitsPassword + `"}`},
	}))
	require.Equal(t, 0, limitsUsers(t, env, prefix))

	// Queries over GET still work.
	res = get(url.Values{"query": {`{ __typename }`}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"__typename":"Query"}`, string(res.Data))
}

func TestLimitsProductionHidesSchema(t *testing.T) {
	t.Parallel()
	dev := apptest.Start(t, apptest.Options{NoWork: true})
	prod := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_ENV": "production"}})
	const introspect = `{ __schema { types { name } } }`
	const misspelled = `{ viewer { rol } }`

	t.Run("introspection", func(t *testing.T) {
		res := dev.Do(t, "", introspect, nil)
		require.Empty(t, res.Errors, "%s", res.Body)
		require.Contains(t, string(res.Data), `"name":"Query"`)

		res = prod.Do(t, "", introspect, nil)
		require.NotEmpty(t, res.Errors, "%s", res.Body)
		require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
		require.Contains(t, res.Errors[0].Message, "introspection is disabled")
		require.NotContains(t, string(res.Body), `"Query"`)
		require.NotContains(t, string(res.Body), "SignUpInput")

		res = prod.Do(t, "", `{ __type(name: "Mutation") { fields { name } } }`, nil)
		require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
		require.NotContains(t, string(res.Body), "signUp")

		// __typename is not introspection and stays available.
		res = prod.Do(t, "", `{ __typename }`, nil)
		require.Empty(t, res.Errors, "%s", res.Body)
	})

	t.Run("suggestions", func(t *testing.T) {
		res := dev.Do(t, "", misspelled, nil)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", res.Code(), "%s", res.Body)
		require.Contains(t, res.Errors[0].Message, `Did you mean "role"?`)

		res = prod.Do(t, "", misspelled, nil)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", res.Code(), "%s", res.Body)
		require.Contains(t, res.Errors[0].Message, `Cannot query field "rol" on type "Viewer"`)
		require.NotContains(t, string(res.Body), "Did you mean")
		require.NotContains(t, string(res.Body), `"role"`)

		// Nor are arguments, type names, enum values or input fields: each of these is suggested
		// in development and not in production.
		for _, q := range []string{
			`mutation { logOut(refreshTokn: "x") }`,
			`fragment F on Viewr { role } { ...F }`,
			`mutation { updateAgentSettings(input: {personality: PRECIS}) { personality } }`,
			`mutation { signUp(input: {emial: "a@b.co", password: "x", tenantName: "t"}) { accessToken } }`,
			`{ viewer }`,
		} {
			res := dev.Do(t, "", q, nil)
			require.Equal(t, "GRAPHQL_VALIDATION_FAILED", res.Code(), "%s", res.Body)
			require.Contains(t, string(res.Body), "Did you mean", "development suggests: %s", q)

			res = prod.Do(t, "", q, nil)
			require.Equal(t, "GRAPHQL_VALIDATION_FAILED", res.Code(), "%s", res.Body)
			require.NotContains(t, string(res.Body), "Did you mean", "%s", q)
		}
	})
}

func TestLimitsErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_ENV": "production"}})
	for _, tc := range []struct {
		name, query string
		vars        map[string]any
		code        string
	}{
		{"unterminated selection", `{ viewer { `, nil, "GRAPHQL_PARSE_FAILED"},
		{"garbage", `}}} not graphql`, nil, "GRAPHQL_PARSE_FAILED"},
		{"unterminated string", `{ node(id: "abc) { id } }`, nil, "GRAPHQL_PARSE_FAILED"},
		{"empty query", ``, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"unknown field", `{ nope }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"variable of the wrong type", `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": map[string]any{"x": 1}}, "GRAPHQL_VALIDATION_FAILED"},
		{"missing variable", `query($id: ID!) { node(id: $id) { id } }`, nil, "GRAPHQL_VALIDATION_FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := env.Do(t, "", tc.query, tc.vars)
			require.NotEmpty(t, res.Errors, "%s", res.Body)
			for _, e := range res.Errors {
				require.NotEmpty(t, e.Extensions["code"], "%s", res.Body)
			}
			require.Equal(t, tc.code, res.Code(), "%s", res.Body)
		})
	}

	t.Run("body that is not JSON", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", strings.NewReader(`{"query": `))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res := env.Raw(t, req)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
	})

	t.Run("unknown operation name", func(t *testing.T) {
		body := `{"query": "query A { __typename }", "operationName": "B"}`
		req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res := env.Raw(t, req)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", res.Code(), "%s", res.Body)
	})
}
