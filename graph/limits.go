package graph

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/agentry/agentry/internal/apperr"
)

// maxExpandedFields bounds the fields an operation selects once its fragments are expanded. Without
// it, a few hundred bytes of fragments that each spread the next one twice expand exponentially
// and pin a CPU in gqlgen's complexity walker. queryLimits runs before the complexity limit.
const maxExpandedFields = 100_000

// queryLimits rejects operations nested too deeply, with too many aliases or expanding to too many
// fields, after parsing and validation and before any resolver runs.
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
	w := walker{doc: oc.Doc, frags: map[string]*setStats{}}
	s := w.walk(oc.Operation.SelectionSet)
	if s.fields > maxExpandedFields {
		return limitError(fmt.Sprintf("operation selects more than %d fields once its fragments are spread; that is the limit", maxExpandedFields))
	}
	if s.depth > l.maxDepth {
		return limitError(fmt.Sprintf("operation is nested %d levels deep; the limit is %d", s.depth, l.maxDepth))
	}
	if s.aliases > l.maxAliases {
		return limitError(fmt.Sprintf("operation uses %d aliases; the limit is %d", s.aliases, l.maxAliases))
	}
	return nil
}

func limitError(msg string) *gqlerror.Error {
	return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(apperr.BadUserInput)}}
}

// setStats describes a selection set with its fragments expanded: the deepest field level, and the
// aliases and fields it selects (each spread of a fragment counts its fields again).
type setStats struct {
	depth, aliases, fields int
}

type walker struct {
	doc   *ast.QueryDocument
	frags map[string]*setStats // per fragment, computed once; nil while being computed
}

// satAdd adds without overflowing: counts saturate far above any limit.
func satAdd(a, b int) int {
	const ceiling = 1 << 40
	return min(a+b, ceiling)
}

// walk measures set. Each fragment is measured once and reused at every spread, so the walk is
// linear in the document's size however often fragments spread each other (validation has ruled
// out cycles; the nil marker guards anyway).
func (w *walker) walk(set ast.SelectionSet) setStats {
	var out setStats
	add := func(s setStats) {
		out.depth = max(out.depth, s.depth)
		out.aliases = satAdd(out.aliases, s.aliases)
		out.fields = satAdd(out.fields, s.fields)
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			child := w.walk(s.SelectionSet)
			child.depth++
			child.fields = satAdd(child.fields, 1)
			if s.Alias != "" && s.Alias != s.Name {
				child.aliases = satAdd(child.aliases, 1)
			}
			add(child)
		case *ast.InlineFragment:
			add(w.walk(s.SelectionSet))
		case *ast.FragmentSpread:
			st, done := w.frags[s.Name]
			if done && st == nil {
				continue // cycle
			}
			if !done {
				w.frags[s.Name] = nil
				var computed setStats
				if f := w.doc.Fragments.ForName(s.Name); f != nil {
					computed = w.walk(f.SelectionSet)
				}
				st = &computed
				w.frags[s.Name] = st
			}
			add(*st)
		}
	}
	return out
}
