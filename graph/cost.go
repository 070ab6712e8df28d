package graph

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/99designs/gqlgen/graphql"
)

// Costs the complexity limit counts. A field costs 1 plus what it selects; a field that returns
// many objects costs what it selects as many times as it may return them, so aliases of list
// fields cannot multiply an answer past the limit.
const (
	// defaultPageSize is a connection's page without first (model.PageSize).
	defaultPageSize = 20
	// unpagedListSize stands for the length of a list field without first (a run's tool calls,
	// a project's files): they are short in practice, and their size is not known before.
	unpagedListSize = 10
)

// defaultFirst are the fields whose default page differs from defaultPageSize.
var defaultFirst = map[string]int{"Run.events": 500}

// fixedCosts are fields whose work is not in what they select: a diff reads two versions of a
// file (up to a MiB each) and compares them, a snapshot diff several (its total is bounded in
// internal/workspace): at most two fit in one operation.
var fixedCosts = map[string]int{"Query.fileDiff": 2000, "Query.snapshotDiff": 2000}

// costedSchema is the executable schema with the costs above as its complexity.
type costedSchema struct {
	graphql.ExecutableSchema
}

func withCosts(es graphql.ExecutableSchema) costedSchema { return costedSchema{es} }

func (s costedSchema) Complexity(ctx context.Context, typeName, field string, child int, args map[string]any) (int, bool) {
	if c, ok := s.ExecutableSchema.Complexity(ctx, typeName, field, child, args); ok {
		return c, ok
	}
	key := typeName + "." + field
	if c, ok := fixedCosts[key]; ok {
		return satAdd(c, child), true
	}
	t := s.Schema().Types[typeName]
	if t == nil {
		return 0, false
	}
	def := t.Fields.ForName(field)
	if def == nil {
		return 0, false
	}
	n := 1
	switch {
	case def.Arguments.ForName("first") != nil:
		n = defaultPageSize
		if d, ok := defaultFirst[key]; ok {
			n = d
		}
		if v, ok := intArg(args["first"]); ok && v >= 0 {
			n = v
		}
		if v, ok := intArg(args["last"]); ok && v >= 0 && def.Arguments.ForName("last") != nil {
			n = v // a connection paged backwards (messages)
		}
	case def.Type.Elem != nil && !strings.HasSuffix(typeName, "Connection"):
		// A connection's edges are its page, counted at the field that returns the connection.
		n = unpagedListSize
	}
	return satAdd(1, satMul(max(n, 1), child)), true
}

// intArg reads an Int argument as the complexity walker passes it (a literal or a variable).
func intArg(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return int(min(v, 1<<31)), true
	case float64:
		return int(min(v, 1<<31)), true
	case json.Number:
		n, err := v.Int64()
		return int(min(n, 1<<31)), err == nil
	}
	return 0, false
}

func satMul(a, b int) int {
	const ceiling = 1 << 40
	if a == 0 || b == 0 {
		return 0
	}
	if a > ceiling/b {
		return ceiling
	}
	return a * b
}
