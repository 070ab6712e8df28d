package graph

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/agentry/agentry/internal/apperr"
)

// queryLimits rejects operations nested too deeply or with too many aliases, after parsing and
// validation and before any resolver runs.
type queryLimits struct {
	maxDepth   int
	maxAliases int
}

var (
	_ graphql.HandlerExtension        = queryLimits{}
	_ graphql.OperationContextMutator = queryLimits{}
)

func (queryLimits) ExtensionName() string                   { return "QueryLimits" }
func (queryLimits) Validate(graphql.ExecutableSchema) error { return nil }
func (l queryLimits) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	w := walker{doc: oc.Doc, seen: map[string]bool{}}
	depth := w.depth(oc.Operation.SelectionSet, 1)
	if depth > l.maxDepth {
		return limitError(fmt.Sprintf("operation is nested %d levels deep; the limit is %d", depth, l.maxDepth))
	}
	if w.aliases > l.maxAliases {
		return limitError(fmt.Sprintf("operation uses %d aliases; the limit is %d", w.aliases, l.maxAliases))
	}
	return nil
}

func limitError(msg string) *gqlerror.Error {
	return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(apperr.BadUserInput)}}
}

type walker struct {
	doc     *ast.QueryDocument
	seen    map[string]bool
	aliases int
}

// depth returns the deepest field level under set, counting aliases on the way. Fragments are
// expanded (validation has ruled out cycles; seen guards anyway).
func (w *walker) depth(set ast.SelectionSet, level int) int {
	max := level - 1
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			if s.Alias != "" && s.Alias != s.Name {
				w.aliases++
			}
			d = level
			if len(s.SelectionSet) > 0 {
				d = w.depth(s.SelectionSet, level+1)
			}
		case *ast.InlineFragment:
			d = w.depth(s.SelectionSet, level)
		case *ast.FragmentSpread:
			if w.seen[s.Name] {
				continue
			}
			w.seen[s.Name] = true
			if f := w.doc.Fragments.ForName(s.Name); f != nil {
				d = w.depth(f.SelectionSet, level)
			}
			delete(w.seen, s.Name)
		}
		if d > max {
			max = d
		}
	}
	return max
}
