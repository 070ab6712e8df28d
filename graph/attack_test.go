package graph_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/graph"
	"github.com/agentry/agentry/internal/app/apptest"
)

// Documents that would cost seconds of CPU (thousands of selections, amplifying aliases of
// list fields, large diffs), sent through HTTP as an attacker would. Tests assert the refusal;
// BenchmarkAttacks reports the process's CPU time per attack (cpu-ms/op).

// typenames is a query of n __typename selections (11 bytes each).
func typenames(n int) string {
	return "{" + strings.Repeat(" __typename", n) + " }"
}

// listAliases asks n aliases of a run's events (1000 each).
func listAliases(n int, runID string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: run(id: %q) { events(first: 1000) { seq type data } }", i, runID)
	}
	b.WriteString(" }")
	return b.String()
}

// fileDiffs asks n diffs of one file.
func fileDiffs(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, ` d%d: fileDiff(path: "big.txt", fromVersion: 1, toVersion: 2)`, i)
	}
	b.WriteString(" }")
	return b.String()
}

// nestedRepeats is the costliest shape for validation that the limits let through: every
// selection set repeats one field as often as allowed, nested as deep as the field count allows
// (3 levels of 7 under __type: 399 fields; the overlapping-fields rule compares the repeats in
// pairs at every level).
func nestedRepeats() string {
	q := strings.Repeat(" name", 7)
	for range 2 {
		q = strings.Repeat(" ofType {"+q+" }", 7)
	}
	return `{ __type(name: "Query") {` + q + " } }"
}

// expandingFragments are 40 fragments that each spread the next twice: 2^40 fields once
// expanded, from a few hundred bytes.
func expandingFragments() string {
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	for i := range 40 {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	b.WriteString("fragment F40 on Query { __typename }\n")
	return b.String()
}

// fakeRunID is a well-formed Run id (the limits act before any resolver looks it up).
const fakeRunID = "UnVuOjAxOTAwMDAwLTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMA"

func TestAttackTypenames(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	q := typenames(9990)
	require.Greater(t, len(q), 100_000)

	// Anonymous: the lower token limit refuses it before it is parsed whole.
	res := env.Do(t, "", q, nil)
	requireRejected(t, res, "GRAPHQL_PARSE_FAILED", "exceeded token limit of 2000 (requests without credentials")

	// Signed in: under the token limit, refused by the field count before validation.
	token := env.SignUp(t, "", "").AccessToken
	res = env.Do(t, token, q, nil)
	requireRejected(t, res, "BAD_USER_INPUT", "document selects 9990 fields; the limit is 500")

	// Fragments count once where written, and at each spread once expanded.
	res = env.Do(t, token, expandingFragments(), nil)
	requireRejected(t, res, "BAD_USER_INPUT", "more than 10000 fields once its fragments are spread")

	// Repeats of one field in a selection set are bounded (validation compares them in pairs).
	res = env.Do(t, token, typenames(400), nil)
	requireRejected(t, res, "BAD_USER_INPUT", `a selection set asks for "__typename" 400 times; the limit is 10`)
	res = env.Do(t, token, "{ ...R ...R2 }\nfragment R on Query {"+strings.Repeat(" __typename", 6)+" }\nfragment R2 on Query {"+strings.Repeat(" __typename", 6)+" }", nil)
	requireRejected(t, res, "BAD_USER_INPUT", `"__typename" 12 times`)
	res = env.Do(t, token, typenames(10), nil)
	require.Empty(t, res.Errors, "%s", res.Body)
}

func TestAttackListAliases(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	token := env.SignUp(t, "", "").AccessToken
	res := env.Do(t, token, listAliases(45, fakeRunID), nil)
	requireRejected(t, res, "COMPLEXITY_LIMIT_EXCEEDED", "operation has complexity 135090, which exceeds the limit of 5000")

	// Pages count at their default size: 45 aliases of conversations' default 20 messages.
	var b strings.Builder
	b.WriteString("{")
	for i := range 45 {
		fmt.Fprintf(&b, " a%d: conversations { edges { node { messages { edges { node { content parts } } } } } }", i)
	}
	b.WriteString(" }")
	res = env.Do(t, token, b.String(), nil)
	requireRejected(t, res, "COMPLEXITY_LIMIT_EXCEEDED", "exceeds the limit of 5000")

	// One such alias is fine.
	res = env.Do(t, token, "{ conversations { edges { node { messages { edges { node { content parts } } } } } } }", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
}

func TestAttackFileDiffs(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	token := env.SignUp(t, "", "").AccessToken
	res := env.Do(t, token, fileDiffs(20), nil)
	requireRejected(t, res, "COMPLEXITY_LIMIT_EXCEEDED", "operation has complexity 40000, which exceeds the limit of 5000")
	res = env.Do(t, token, fileDiffs(3), nil)
	requireRejected(t, res, "COMPLEXITY_LIMIT_EXCEEDED", "exceeds the limit of 5000")
	// Two fit (the file does not exist: each is NOT_FOUND, resolved).
	res = env.Do(t, token, fileDiffs(2), nil)
	require.Equal(t, "NOT_FOUND", res.Code(), "%s", res.Body)
}

// TestAttackAnswerSize: an answer larger than MaxResponseBytes is replaced by an error.
func TestAttackAnswerSize(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{NoWork: true})
	srv := limitsServer(t, env, graph.Limits{MaxResponseBytes: 2000})
	res := limitsPost(t, srv.URL, "{ __schema { types { name description } } }", nil)
	requireRejected(t, res, "BAD_USER_INPUT", "the answer is")
	require.Contains(t, res.Errors[0].Message, "bytes; the limit is 2000")
	res = limitsPost(t, srv.URL, "{ __typename }", nil)
	require.Empty(t, res.Errors, "%s", res.Body)
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAttacks sends each attack through HTTP and reports the CPU time of the whole test
// process per attack (server and client: an upper bound of the server's), as cpu-ms/op.
func BenchmarkAttacks(b *testing.B) {
	env := apptest.Start(b, apptest.Options{NoWork: true, Env: map[string]string{"AGENTRY_MAX_BODY_BYTES": fmt.Sprint(4 << 20)}})
	token := env.SignUp(b, "", "").AccessToken
	for _, c := range []struct {
		name, token, query string
		refused            bool
	}{
		{"typenames-9990-anonymous", "", typenames(9990), true},
		{"typenames-9990-signed-in", token, typenames(9990), true},
		{"typenames-400-repeated", token, typenames(400), true},
		{"nested-repeats-at-the-limit", token, nestedRepeats(), false},
		{"fragments-expanding", token, expandingFragments(), true},
		{"list-aliases-45", token, listAliases(45, fakeRunID), true},
		{"file-diffs-20", token, fileDiffs(20), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			start := cpuTime(b)
			i := 0
			for b.Loop() {
				// A comment makes each document new to the query cache, as an attacker would.
				i++
				res := env.Do(b, c.token, fmt.Sprintf("%s\n# %d", c.query, i), nil)
				if c.refused != (len(res.Errors) > 0) {
					b.Fatalf("refused=%v expected: %s", c.refused, res.Body)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
