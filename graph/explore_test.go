package graph_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// introspectionQuery is graphql-js's getIntrospectionQuery() (v16, default options): what
// GraphiQL, Postman and GraphQL Code Generator send. It nests 15 levels deep.
const introspectionQuery = `
    query IntrospectionQuery {
      __schema {
        queryType { name }
        mutationType { name }
        subscriptionType { name }
        types {
          ...FullType
        }
        directives {
          name
          description
          locations
          args {
            ...InputValue
          }
        }
      }
    }

    fragment FullType on __Type {
      kind
      name
      description
      fields(includeDeprecated: true) {
        name
        description
        args {
          ...InputValue
        }
        type {
          ...TypeRef
        }
        isDeprecated
        deprecationReason
      }
      inputFields {
        ...InputValue
      }
      interfaces {
        ...TypeRef
      }
      enumValues(includeDeprecated: true) {
        name
        description
        isDeprecated
        deprecationReason
      }
      possibleTypes {
        ...TypeRef
      }
    }

    fragment InputValue on __InputValue {
      name
      description
      type { ...TypeRef }
      defaultValue
    }

    fragment TypeRef on __Type {
      kind
      name
      ofType {
        kind
        name
        ofType {
          kind
          name
          ofType {
            kind
            name
            ofType {
              kind
              name
              ofType {
                kind
                name
                ofType {
                  kind
                  name
                  ofType {
                    kind
                    name
                  }
                }
              }
            }
          }
        }
      }
    }
  `

func get(t *testing.T, env *apptest.Env, path, accept string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.Server.URL+path, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

func TestExploreDevelopment(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})

	// The standard introspection query is answered, without credentials.
	res := env.Do(t, "", introspectionQuery, nil)
	require.Empty(t, res.Errors, "%s", res.Body[:min(len(res.Body), 500)])
	require.Contains(t, string(res.Data), `"queryType":{"name":"Query"}`)

	// GraphiQL for a browser, with its assets from this server only.
	code, ctype, page := get(t, env, "/graphql", "text/html,application/xhtml+xml")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, ctype, "text/html")
	require.Contains(t, page, "GraphiQL")
	require.Contains(t, page, `src="/graphql/graphiql/graphiql.js"`)
	require.NotContains(t, page, "https://", "no asset from another origin")
	for _, asset := range []string{"graphiql.js", "graphiql.min.css", "react.production.min.js", "react-dom.production.min.js"} {
		code, _, body := get(t, env, "/graphql/graphiql/"+asset, "")
		require.Equal(t, http.StatusOK, code, asset)
		require.Greater(t, len(body), 1000, asset)
	}
	// A GET query still works, and a client asking for JSON gets the API.
	code, _, body := get(t, env, "/graphql?query=%7B__typename%7D", "text/html")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"data":{"__typename":"Query"}}`, body)

	// The schema file, the same as the one committed at the repository's root.
	code, ctype, schema := get(t, env, "/graphql/schema.graphql", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, ctype, "text/plain")
	committed, err := os.ReadFile("../schema.graphql")
	require.NoError(t, err)
	require.Equal(t, string(committed), schema, "schema.graphql is stale: run make generate")
	require.Contains(t, schema, "type Query {")
}

func TestExploreProduction(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_ENV": "production"}})
	code, _, page := get(t, env, "/graphql", "text/html")
	require.NotContains(t, page, "GraphiQL")
	require.NotEqual(t, http.StatusOK, code)
	for _, path := range []string{"/graphql/schema.graphql", "/graphql/graphiql/graphiql.js"} {
		code, _, body := get(t, env, path, "")
		require.Equal(t, http.StatusNotFound, code, path)
		require.False(t, strings.Contains(body, "type Query"), path)
	}
	res := env.Do(t, "", introspectionQuery, nil)
	require.Equal(t, "FORBIDDEN", res.Code(), "%s", res.Body)
}
