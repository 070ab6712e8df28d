package graph_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/app/apptest"
)

func TestScratch(t *testing.T) {
	for _, envName := range []string{"development", "production"} {
		env := apptest.Start(t, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_ENV": envName}})
		show := func(name, q string) {
			st := time.Now()
			res := env.Do(t, "", q, nil)
			b := res.Body
			if len(b) > 400 {
				b = b[:400]
			}
			fmt.Printf("[%s] %s (%v) %d %s\n", envName, name, time.Since(st), res.Status, b)
		}
		deep := "{ __type(name: \"Query\") " + strings.Repeat("{ ofType ", 49) + "{ name }" + strings.Repeat("}", 49) + " }"
		show("deep", deep)
		show("intro", `{ __schema { types { name } } }`)
		show("intro2", `{ __type(name:"Query") { name } }`)
		show("suggest", `{ viewer { rol } }`)
		show("parse", `{ viewer { `)
		var sb strings.Builder
		sb.WriteString("{")
		for i := 0; i < 10000; i++ {
			fmt.Fprintf(&sb, " a%d: __typename", i)
		}
		sb.WriteString("}")
		show("aliases10k", sb.String())
		show("typename9999", "{"+strings.Repeat(" __typename", 9990)+"}")
		show("viewer2500", "{"+strings.Repeat(" viewer { role }", 2400)+"}")
		// fragment explosion
		var fb strings.Builder
		fb.WriteString("query { ...F0 }\n")
		for i := 0; i < 22; i++ {
			fmt.Fprintf(&fb, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
		}
		fb.WriteString("fragment F22 on Query { __typename }\n")
		show("fragbomb22", fb.String())
		req, _ := http.NewRequest("GET", env.Server.URL+"/graphql?query="+url.QueryEscape(`mutation{logOut(refreshToken:"x")}`), nil)
		res := env.Raw(t, req)
		fmt.Printf("[%s] GET mutation %d %s\n", envName, res.Status, res.Body)
		req, _ = http.NewRequest("POST", env.Server.URL+"/graphql", strings.NewReader("not json"))
		req.Header.Set("Content-Type", "application/json")
		res = env.Raw(t, req)
		fmt.Printf("[%s] bad json %d %s\n", envName, res.Status, res.Body)
	}
}
