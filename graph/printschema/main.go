// Command printschema writes the merged GraphQL schema (graph/schema/*.graphqls as gqlgen
// compiled them) to stdout: `make generate` commits it as schema.graphql at the repository root,
// for tools that want one file (GraphQL Code Generator, Postman, editors).
package main

import (
	"fmt"
	"os"

	"github.com/agentry/agentry/graph"
)

func main() {
	if _, err := os.Stdout.WriteString(graph.SchemaSDL()); err != nil {
		fmt.Fprintln(os.Stderr, "printschema:", err)
		os.Exit(1)
	}
}
