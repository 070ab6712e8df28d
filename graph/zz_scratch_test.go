package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/complexity"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/agentry/agentry/graph/generated"
)

func TestScratch2(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{})
	run := func(name, q string) {
		st := time.Now()
		doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: q}, 10000)
		if err != nil {
			fmt.Println(name, "parse", err)
			return
		}
		p := time.Since(st)
		errs := validator.ValidateWithRules(es.Schema(), doc, nil)
		v := time.Since(st)
		c := complexity.Calculate(context.Background(), es, doc.Operations[0], nil)
		fmt.Println(name, "parse", p, "validate", v-p, len(errs), "complexity", time.Since(st)-v, c)
	}
	run("typename", "{"+strings.Repeat(" __typename", 9990)+"}")
	run("typename3000", "{"+strings.Repeat(" __typename", 3000)+"}")
	for _, n := range []int{20, 22, 24} {
		var fb strings.Builder
		fb.WriteString("query { ...F0 }\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&fb, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
		}
		fmt.Fprintf(&fb, "fragment F%d on Query { __typename }\n", n)
		run(fmt.Sprint("frag", n), fb.String())
	}
}
