package graph_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/app/apptest"
)

// auditDir holds the pinned graphql-http audit suite (package.json, package-lock.json) and the
// script that runs it.
const auditDir = "testdata/audit"

var npmCI sync.Once

// TestGraphQLHTTPAudit runs graphql-http's server audits (GraphQL over HTTP conformance) against
// a development server: every one of them passes, warnings and notices included. It needs node
// and npm; the suite is installed from the committed lock file (npm ci) on first use.
func TestGraphQLHTTPAudit(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the graphql-http audit suite cannot run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var installErr error
	npmCI.Do(func() {
		if _, err := os.Stat(filepath.Join(auditDir, "node_modules", "graphql-http", "package.json")); err == nil {
			return
		}
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = auditDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			installErr = &exec.Error{Name: "npm ci: " + string(out), Err: err}
		}
	})
	require.NoError(t, installErr)

	e := apptest.Start(t, apptest.Options{NoWork: true})
	cmd := exec.CommandContext(ctx, node, "audit.mjs", e.Server.URL+"/graphql")
	cmd.Dir = auditDir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node audit.mjs")
	var results []struct {
		ID, Name, Status, Reason, Body string
		HTTPStatus                     int
	}
	require.NoError(t, json.Unmarshal(out, &results), "%s", out)
	require.GreaterOrEqual(t, len(results), 60, "the suite's audits")
	for _, r := range results {
		if r.Status != "ok" {
			t.Errorf("%s %s: %s: %s (HTTP %d: %s)", r.ID, r.Status, r.Name, r.Reason, r.HTTPStatus, r.Body)
		}
	}
}
