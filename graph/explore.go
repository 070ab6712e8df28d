package graph

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"

	"github.com/agentry/agentry/graph/generated"
)

// graphiqlAssets are GraphiQL 4.1.2 with React 18.2.0 (the versions gqlgen's playground page
// names), copied from their npm packages, so the page loads nothing from another origin.
//
//go:embed graphiql
var graphiqlAssets embed.FS

// assetsPath is where the assets are served, under the GraphQL endpoint.
const assetsPath = "/graphql/graphiql/"

// SchemaSDL is the merged schema in GraphQL's schema language, built-in types left out: what
// schema.graphql at the repository root holds and /graphql/schema.graphql serves in
// development.
var SchemaSDL = sync.OnceValue(func() string {
	var b bytes.Buffer
	formatter.NewFormatter(&b, formatter.WithIndent("  ")).FormatSchema(generated.NewExecutableSchema(generated.Config{}).Schema())
	return b.String()
})

// explore serves, in development only, what makes the API explorable besides introspection:
// GraphiQL at GET /graphql for browsers (Accept: text/html), its assets, and the schema file.
// Other paths under /graphql/ are not found (in production, all of them); the rest goes to api.
func explore(development bool, api http.Handler) http.Handler {
	if !development {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/graphql/") {
				http.NotFound(w, r)
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	page := playground.Handler("agentry", "/graphql",
		playground.WithGraphiqlVersion(assetsPath+"graphiql.js", assetsPath+"graphiql.min.css", sri("graphiql.js"), sri("graphiql.min.css")),
		playground.WithGraphiqlReactVersion(assetsPath+"react.production.min.js", assetsPath+"react-dom.production.min.js",
			sri("react.production.min.js"), sri("react-dom.production.min.js")),
	)
	assets := http.StripPrefix("/graphql/", http.FileServerFS(graphiqlAssets))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/graphql/schema.graphql":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(SchemaSDL()))
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, assetsPath):
			w.Header().Set("Cache-Control", "public, max-age=86400")
			assets.ServeHTTP(w, r)
		case r.Method == http.MethodGet && r.URL.Path == "/graphql" && r.URL.RawQuery == "" && acceptsHTML(r):
			page.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, "/graphql/"):
			http.NotFound(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// sri is the subresource integrity of an embedded asset.
func sri(name string) string {
	b, err := graphiqlAssets.ReadFile("graphiql/" + name)
	if err != nil {
		panic(err) // the assets are embedded at build time
	}
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// acceptsHTML reports whether a request is a browser's page load.
func acceptsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// Schema is the executable schema's definition (for tools and tests that walk it).
func Schema() *ast.Schema { return generated.NewExecutableSchema(generated.Config{}).Schema() }
