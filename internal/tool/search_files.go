package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/workspace"
)

// SearchFiles is the search_files tool: lines containing a literal string, like grep -F.
// Read-only, risk 5 (25 when the prefix is a secret, see Risk scores).
// The zero value works on a workspace with the default limits.
type SearchFiles struct{ ws *workspace.Store }

type searchFilesArgs struct {
	Query      string `json:"query"`
	PathPrefix string `json:"path_prefix"`
	Limit      int    `json:"limit"`
}

// Spec implements Tool.
func (*SearchFiles) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: SearchFilesName,
		Description: "Search the contents of the project workspace's files for a literal, case-sensitive string " +
			"(not a regular expression) and return the matching lines as \"path:line: text\", in path and line order. " +
			"Give path_prefix to search one directory. Long lines are shortened around the match; " +
			"results are cut at limit (default 50) with a note.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "The exact text to find within one line."},
    "path_prefix": {"type": "string", "description": "Only search files at or under this directory, e.g. \"src\". Omit for the whole workspace."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Most matching lines to return (default 50)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
	}
}

// Risk implements Tool.
func (*SearchFiles) Risk(args json.RawMessage) int {
	return readRisk(riskSearchFiles, args, "path_prefix", true)
}

// ReadOnly implements Tool.
func (*SearchFiles) ReadOnly() bool { return true }

// Run implements Tool.
func (t *SearchFiles) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a searchFilesArgs
	if err := decodeArgs(SearchFilesName, args, &a); err != nil {
		return Result{}, err
	}
	if err := checkEnv(env); err != nil {
		return Result{}, err
	}
	prefix, err := workspace.NormalizePrefix(a.PathPrefix)
	if err != nil {
		return Result{}, err
	}
	res, err := t.ws.Search(ctx, env.Tx, env.TenantID, env.ProjectID, a.Query, prefix, a.Limit)
	if err != nil {
		return Result{}, err
	}
	if len(res.Matches) == 0 {
		if prefix == "" {
			return Result{Output: fmt.Sprintf("no lines contain %q", a.Query)}, nil
		}
		return Result{Output: fmt.Sprintf("no lines under %q contain %q", prefix, a.Query)}, nil
	}
	var b strings.Builder
	for _, m := range res.Matches {
		fmt.Fprintf(&b, "%s:%d: %s\n", m.Path, m.Line, m.Text)
	}
	if res.Truncated {
		fmt.Fprintf(&b, "[results cut after %s; more exist: narrow path_prefix or the query]\n", plural(len(res.Matches), "line", "lines"))
	}
	return Result{Output: strings.TrimSuffix(b.String(), "\n")}, nil
}
