package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// GraphQL over HTTP (the spec graphql-http's audit suite checks) answers a request refused
// before execution differently from gqlgen's HTTP transports, which answer 422 to an
// application/json request whose document does not parse or validate, and write "data": null
// although nothing was executed. refusals corrects those answers around gqlgen's POST and GET
// transports:
//
//   - a request without a query (its parameters are invalid) is 400, whatever it accepts;
//   - a document that does not parse or validate, or variables that do not coerce, are 200
//     for application/json (the errors say what is wrong) and 400 for
//     application/graphql-response+json (as gqlgen answers);
//   - the answer to a refused request has no "data" entry.
//
// gqlgen's transports set a status only when they refuse a request before executing it; an
// executed operation's answer (always 200) passes through untouched.

// refusals serves next with the statuses and bodies above for POST and GET requests; others
// (WebSocket upgrades, SSE streams) pass through.
func refusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") ||
			(r.Method != http.MethodPost && r.Method != http.MethodGet) {
			next.ServeHTTP(w, r)
			return
		}
		rw := &refusedWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		rw.finish()
	})
}

// requireQuery refuses a request without a query before gqlgen parses it (gqlgen would answer
// "no operation provided" as a failed validation).
type requireQuery struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = requireQuery{}

func (requireQuery) ExtensionName() string                   { return "RequireQuery" }
func (requireQuery) Validate(graphql.ExecutableSchema) error { return nil }
func (requireQuery) MutateOperationParameters(_ context.Context, p *graphql.RawParams) *gqlerror.Error {
	if strings.TrimSpace(p.Query) != "" {
		return nil
	}
	// The code gqlgen gives this refusal ("no operation provided").
	return &gqlerror.Error{Message: noQuery, Extensions: map[string]any{"code": errcode.ValidationFailed}}
}

// noQuery is requireQuery's message, by which refusedWriter knows the request's parameters were
// invalid.
const noQuery = `the request has no query: send {"query": "..."} (POST) or ?query=... (GET)`

// refusedWriter holds back the answer of a request gqlgen refused (it set a status) to correct
// it in finish; any other answer goes through as it is written.
type refusedWriter struct {
	http.ResponseWriter
	status  int  // the status gqlgen set; 0 while none was
	passing bool // the answer is going through as written
	body    bytes.Buffer
}

func (w *refusedWriter) WriteHeader(code int) {
	if w.passing || w.status != 0 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.status = code
}

func (w *refusedWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.passing = true
		return w.ResponseWriter.Write(p)
	}
	return w.body.Write(p)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *refusedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *refusedWriter) finish() {
	if w.status == 0 || w.passing {
		return
	}
	code, body := w.status, w.body.Bytes()
	var fields map[string]json.RawMessage
	var errs []struct{ Message string }
	if json.Unmarshal(body, &fields) == nil {
		_ = json.Unmarshal(fields["errors"], &errs)
		if string(fields["data"]) == "null" {
			delete(fields, "data")
			if b, err := json.Marshal(fields); err == nil {
				body = b
			}
		}
	}
	switch {
	case len(errs) == 1 && errs[0].Message == noQuery:
		code = http.StatusBadRequest
	case code == http.StatusUnprocessableEntity && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json"):
		code = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(code)
	_, _ = w.ResponseWriter.Write(body)
}
