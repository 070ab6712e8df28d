package graph

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/auth"
)

// Limits a document must keep before gqlgen validates it. Validation is superlinear in the
// fields of a selection set (the overlapping-fields rule compares them in pairs) and gqlgen's
// complexity walker follows every fragment spread, so an operation is measured here first, in
// one linear pass over the parsed document.
const (
	// maxSelections bounds the fields written in a document (fragments counted once).
	maxSelections = 500
	// maxRepeats bounds the fields of one selection set that share a response name (fragments
	// spread into it included): validation compares such fields in pairs.
	maxRepeats = 10
	// maxExpandedFields bounds the fields an operation selects once its fragments are expanded:
	// a few hundred bytes of fragments that each spread the next one twice would otherwise
	// expand exponentially.
	maxExpandedFields = 10_000
)

// queryLimits rejects documents with too many tokens (fewer for anonymous requests), too many
// fields, nested too deeply or with too many aliases before gqlgen parses and validates them
// (MutateOperationParameters), so no such document costs more than one linear parse.
// Introspection-only operations are exempt from the depth limit (__Type.ofType nests: the
// standard introspection query is 15 levels deep); in production they are refused as such
// (FORBIDDEN) when they run.
type queryLimits struct {
	maxDepth           int
	maxAliases         int
	maxTokens          int
	maxTokensAnonymous int
	// cache is gqlgen's query cache: a document in it has passed these checks already.
	cache graphql.Cache[*ast.QueryDocument]
}

var (
	_ graphql.HandlerExtension          = (*queryLimits)(nil)
	_ graphql.OperationParameterMutator = (*queryLimits)(nil)
)

func (*queryLimits) ExtensionName() string                   { return "QueryLimits" }
func (*queryLimits) Validate(graphql.ExecutableSchema) error { return nil }

func (l *queryLimits) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if l.cache != nil {
		if _, ok := l.cache.Get(ctx, p.Query); ok {
			return nil
		}
	}
	tokens := l.maxTokens
	_, signedIn := auth.ActorFrom(ctx)
	if !signedIn {
		tokens = l.maxTokensAnonymous
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, tokens)
	if err != nil {
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && strings.HasPrefix(gqlErr.Message, "exceeded token limit") {
			msg := gqlErr.Message
			if !signedIn {
				msg += fmt.Sprintf(" (requests without credentials; signed-in ones may have %d)", l.maxTokens)
			}
			return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": errcode.ParseFailed}}
		}
		return nil // gqlgen parses again and reports the syntax error
	}
	if n := countSelections(doc); n > maxSelections {
		return limitError(fmt.Sprintf("document selects %d fields; the limit is %d", n, maxSelections))
	}
	if name, n := mostRepeated(doc); n > maxRepeats {
		return limitError(fmt.Sprintf("a selection set asks for %q %d times; the limit is %d", name, n, maxRepeats))
	}
	for _, op := range doc.Operations {
		if p.OperationName != "" && op.Name != p.OperationName {
			continue
		}
		if err := l.check(doc, op); err != nil {
			return err
		}
	}
	return nil
}

func (l *queryLimits) check(doc *ast.QueryDocument, op *ast.OperationDefinition) *gqlerror.Error {
	w := walker{doc: doc, frags: map[string]*setStats{}}
	s := w.walk(op.SelectionSet)
	if s.fields > maxExpandedFields {
		return limitError(fmt.Sprintf("operation selects more than %d fields once its fragments are spread; that is the limit", maxExpandedFields))
	}
	if s.depth > l.maxDepth && !introspectionOnly(doc, op.SelectionSet, 0) {
		return limitError(fmt.Sprintf("operation is nested %d levels deep; the limit is %d", s.depth, l.maxDepth))
	}
	if s.aliases > l.maxAliases {
		return limitError(fmt.Sprintf("operation uses %d aliases; the limit is %d", s.aliases, l.maxAliases))
	}
	return nil
}

// introspectionOnly reports whether an operation's root fields are all __schema, __type or
// __typename (through fragments, at most a few levels of them).
func introspectionOnly(doc *ast.QueryDocument, set ast.SelectionSet, depth int) bool {
	if depth > 8 {
		return false
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name != "__schema" && s.Name != "__type" && s.Name != "__typename" {
				return false
			}
		case *ast.InlineFragment:
			if !introspectionOnly(doc, s.SelectionSet, depth+1) {
				return false
			}
		case *ast.FragmentSpread:
			f := doc.Fragments.ForName(s.Name)
			if f == nil || !introspectionOnly(doc, f.SelectionSet, depth+1) {
				return false
			}
		}
	}
	return true
}

// countSelections counts the fields written in a document, each fragment once.
func countSelections(doc *ast.QueryDocument) int {
	n := 0
	var count func(ast.SelectionSet)
	count = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				n++
				count(s.SelectionSet)
			case *ast.InlineFragment:
				count(s.SelectionSet)
			}
		}
	}
	for _, op := range doc.Operations {
		count(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		count(f.SelectionSet)
	}
	return n
}

// mostRepeated finds the response name selected most often in one selection set, with the
// fields of inline fragments and fragment spreads at that level counted in (each fragment once
// per set, as validation does).
func mostRepeated(doc *ast.QueryDocument) (string, int) {
	best, bestN := "", 0
	var flatten func(set ast.SelectionSet, counts map[string]int, seen map[string]bool, depth int)
	flatten = func(set ast.SelectionSet, counts map[string]int, seen map[string]bool, depth int) {
		if depth > 16 {
			return
		}
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				name := s.Alias
				if name == "" {
					name = s.Name
				}
				counts[name]++
			case *ast.InlineFragment:
				flatten(s.SelectionSet, counts, seen, depth+1)
			case *ast.FragmentSpread:
				if f := doc.Fragments.ForName(s.Name); f != nil && !seen[s.Name] {
					seen[s.Name] = true
					flatten(f.SelectionSet, counts, seen, depth+1)
				}
			}
		}
	}
	var visit func(set ast.SelectionSet)
	visit = func(set ast.SelectionSet) {
		if len(set) == 0 {
			return
		}
		counts := map[string]int{}
		flatten(set, counts, map[string]bool{}, 0)
		for name, n := range counts {
			if n > bestN {
				best, bestN = name, n
			}
		}
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				visit(s.SelectionSet)
			case *ast.InlineFragment:
				visit(s.SelectionSet)
			}
		}
	}
	for _, op := range doc.Operations {
		visit(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		visit(f.SelectionSet)
	}
	return best, bestN
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

// capResponse replaces an answer whose data is larger than max bytes by an error saying so.
func capResponse(max int) graphql.ResponseMiddleware {
	return func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		res := next(ctx)
		if res != nil && len(res.Data) > max {
			n := len(res.Data)
			res.Data = nil
			res.Errors = gqlerror.List{limitError(fmt.Sprintf("the answer is %d bytes; the limit is %d: ask for fewer objects or fields (first:)", n, max))}
		}
		return res
	}
}
