package graph_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/agentry/agentry/graph"
	"github.com/agentry/agentry/internal/app/apptest"
)

// TestBadScalarsAreBadUserInput: malformed scalars (times, Int64s, strings with NUL) each answer
// BAD_USER_INPUT naming the argument, never "internal error".
func TestBadScalarsAreBadUserInput(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	s := env.SignUp(t, "", "")
	usage := `query($from: Time!, $to: Time!) { usageSummary(from: $from, to: $to, groupBy: DAY) { calls } }`
	budget := `mutation($in: SetBudgetInput!) { setBudget(input: $in) { id } }`
	for name, c := range map[string]struct {
		query string
		vars  map[string]any
		field string
		want  string
	}{
		"time not a time":   {usage, map[string]any{"from": "not a time", "to": "2026-01-02T00:00:00Z"}, "from", "is not a time"},
		"time a number":     {usage, map[string]any{"from": "2026-01-01T00:00:00Z", "to": 12345}, "to", "must be a time"},
		"int64 a string":    {budget, map[string]any{"in": map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": "lots"}}, "tokenLimit", "must be a whole number"},
		"int64 a float":     {budget, map[string]any{"in": map[string]any{"scope": "TENANT", "period": "DAY", "tokenLimit": 1.5}}, "tokenLimit", "not 1.5"},
		"int64 1e30":        {budget, map[string]any{"in": map[string]any{"scope": "TENANT", "period": "DAY", "costLimitMicros": 1e30}}, "costLimitMicros", "not 1e+30"},
		"nul in a title":    {`mutation($t: String) { createConversation(input: {title: $t}) { id } }`, map[string]any{"t": "a\x00b"}, "title", "NUL"},
		"nul in a literal":  {`mutation { createConversation(input: {title: "a\u0000b"}) { id } }`, nil, "title", "NUL"},
		"nul in a search":   {`query($s: String) { memories(search: $s) { edges { cursor } } }`, map[string]any{"s": "\x00"}, "search", "NUL"},
		"nul in a key name": {`mutation($n: String!) { createApiKey(input: {name: $n, role: MEMBER}) { secret } }`, map[string]any{"n": "k\x00"}, "name", "NUL"},
	} {
		res := env.Do(t, s.AccessToken, c.query, c.vars)
		require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s: %s", name, res.Body)
		require.Equal(t, c.field, res.Errors[0].Extensions["field"], "%s: %s", name, res.Body)
		require.Contains(t, res.Errors[0].Message, c.field+": ", "%s: %s", name, res.Body)
		require.Contains(t, res.Errors[0].Message, c.want, "%s: %s", name, res.Body)
	}
}

// TestArbitraryArgumentsNeverInternal is a property test over the whole schema: every argument
// of every query and mutation is sent arbitrary strings (NUL, control and astral characters,
// long ones), numbers (negative, fractional, 1e30, as strings) and values of the wrong kind,
// by a signed-in OWNER, and no answer may be an internal error.
func TestArbitraryArgumentsNeverInternal(t *testing.T) {
	t.Parallel()
	seed := uint64(26)
	if v := os.Getenv("AGENTRY_PROPERTY_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	env := apptest.Start(t, apptest.Options{NoWork: true})
	schema := graph.Schema()
	const trials = 6
	for _, root := range []*ast.Definition{schema.Query, schema.Mutation} {
		for _, f := range root.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			// A session per field: some mutations end theirs (logOut) or change the tenant.
			token := env.SignUp(t, "", "").AccessToken
			for trial := range trials {
				query, vars := arbitraryCall(rng, schema, root, f)
				res := env.Do(t, token, query, vars)
				require.NotEqual(t, 500, res.Status, "seed %d %s trial %d: %s\nvars: %#v", seed, f.Name, trial, res.Body, vars)
				for _, e := range res.Errors {
					require.NotEqual(t, "INTERNAL", e.Extensions["code"], "seed %d %s trial %d: %s\nvars: %#v", seed, f.Name, trial, res.Body, vars)
					require.NotEqual(t, "internal error", e.Message, "seed %d %s trial %d: %s", seed, f.Name, trial, res.Body)
				}
			}
		}
	}
}

// arbitraryCall builds an operation calling f with every argument bound to a variable holding
// an arbitrary value (required ones always, optional ones half the time).
func arbitraryCall(rng *rand.Rand, schema *ast.Schema, root *ast.Definition, f *ast.FieldDefinition) (string, map[string]any) {
	var params, args []string
	vars := map[string]any{}
	for _, a := range f.Arguments {
		if !a.Type.NonNull && rng.IntN(2) == 0 {
			continue
		}
		params = append(params, fmt.Sprintf("$%s: %s", a.Name, a.Type.String()))
		args = append(args, fmt.Sprintf("%s: $%s", a.Name, a.Name))
		vars[a.Name] = arbitraryValue(rng, schema, a.Type, 0)
	}
	op := "query"
	if root.Name == "Mutation" {
		op = "mutation"
	}
	call := f.Name
	if len(args) > 0 {
		call += "(" + strings.Join(args, ", ") + ")"
	}
	if t := schema.Types[f.Type.Name()]; t != nil && (t.Kind == ast.Object || t.Kind == ast.Interface || t.Kind == ast.Union) {
		call += " { __typename }"
	}
	decl := ""
	if len(params) > 0 {
		decl = "(" + strings.Join(params, ", ") + ")"
	}
	return fmt.Sprintf("%s%s { %s }", op, decl, call), vars
}

var arbitraryStrings = []string{
	"", "a", "\x00", "a\x00b", "title\x00", "héllo wörld", "🙂🙃", "\u202e\u0001\u001f", "\uffff",
	"../../etc/passwd", "<script>alert(1)</script>", "' OR 1=1 --", "%s%n", "2026-01-01T00:00:00Z",
	"-1", "1e30", "9223372036854775808", "null", "DAY", "MEMBER", strings.Repeat("x", 3000),
}

var arbitraryNumbers = []any{0, 1, -1, 2147483647, -2147483648, 2147483648, 1.5, -0.5, 1e30, -1e30, 9007199254740993, "12", "abc", true}

// arbitraryValue is a value for a variable of type t: usually of the right shape with an
// arbitrary content, sometimes of another kind altogether.
func arbitraryValue(rng *rand.Rand, schema *ast.Schema, t *ast.Type, depth int) any {
	if rng.IntN(12) == 0 {
		return []any{nil, "x", 7, true, map[string]any{}}[rng.IntN(5)]
	}
	if t.Elem != nil {
		n := rng.IntN(3)
		out := make([]any, n)
		for i := range out {
			out[i] = arbitraryValue(rng, schema, t.Elem, depth+1)
		}
		return out
	}
	def := schema.Types[t.NamedType]
	switch {
	case def == nil:
		return nil
	case def.Kind == ast.Enum:
		if rng.IntN(4) == 0 {
			return "NOT_A_VALUE"
		}
		return def.EnumValues[rng.IntN(len(def.EnumValues))].Name
	case def.Kind == ast.InputObject:
		if depth > 3 {
			return map[string]any{}
		}
		out := map[string]any{}
		for _, f := range def.Fields {
			if f.Type.NonNull || rng.IntN(2) == 0 {
				out[f.Name] = arbitraryValue(rng, schema, f.Type, depth+1)
			}
		}
		return out
	}
	switch t.NamedType {
	case "Int", "Int64", "Float":
		return arbitraryNumbers[rng.IntN(len(arbitraryNumbers))]
	case "Boolean":
		return []any{true, false, "yes", 1}[rng.IntN(4)]
	case "Time":
		return []any{"not a time", 12345, "2026-01-01T00:00:00Z", "", "2026-13-45T99:00:00Z", "2026-01-01T00:00:00.123456789+02:00"}[rng.IntN(6)]
	case "JSON":
		return []any{map[string]any{"a": "\x00"}, "x", 1, nil, []any{1, "\x00"}}[rng.IntN(5)]
	case "ID":
		if rng.IntN(3) == 0 {
			return "\x00"
		}
		return arbitraryStrings[rng.IntN(len(arbitraryStrings))]
	}
	s := arbitraryStrings[rng.IntN(len(arbitraryStrings))]
	if rng.IntN(3) == 0 { // and some random runes
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteRune(rune(rng.IntN(0x2ffff)))
		}
		s += b.String()
	}
	return s
}
