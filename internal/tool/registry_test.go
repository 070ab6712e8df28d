package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/llm"
	"github.com/agentry/agentry/internal/tool"
)

func TestBuiltinNamesAndFlags(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry()
	require.Equal(t, []string{"list_files", "read_file", "write_file", "edit_file", "search_files", "delete_file"}, r.Names())
	readOnly := map[string]bool{"list_files": true, "read_file": true, "search_files": true}
	for _, name := range r.Names() {
		tl, err := r.Get(name)
		require.NoError(t, err)
		require.Equal(t, name, tl.Spec().Name)
		require.Equal(t, readOnly[name], tl.ReadOnly(), name)
	}
}

// Every spec is a valid JSON schema for an object, with a description for the model and for
// every property, and names only properties it declares as required.
func TestSpecsAreValidSchemas(t *testing.T) {
	t.Parallel()
	specs, err := tool.NewRegistry().Specs()
	require.NoError(t, err)
	require.Len(t, specs, 6)
	for _, s := range specs {
		require.NotEmpty(t, s.Description, s.Name)
		require.Greater(t, len(s.Description), 60, "%s: describe the tool for the model", s.Name)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.Parameters))
		require.NoError(t, err, s.Name)
		c := jsonschema.NewCompiler()
		require.NoError(t, c.AddResource("mem:///"+s.Name, doc))
		_, err = c.Compile("mem:///" + s.Name)
		require.NoError(t, err, s.Name)

		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(s.Parameters, &schema), s.Name)
		require.Equal(t, "object", schema.Type, s.Name)
		require.NotNil(t, schema.AdditionalProperties, s.Name)
		require.False(t, *schema.AdditionalProperties, s.Name)
		for _, req := range schema.Required {
			require.Contains(t, schema.Properties, req, s.Name)
		}
		for prop, raw := range schema.Properties {
			var p struct {
				Description string `json:"description"`
			}
			require.NoError(t, json.Unmarshal(raw, &p))
			require.NotEmpty(t, p.Description, "%s.%s", s.Name, prop)
		}
		// The spec travels as JSON in model requests.
		_, err = json.Marshal(s)
		require.NoError(t, err)
	}
	// Specs by name keep the order asked for; an unknown name is an error.
	specs, err = tool.NewRegistry().Specs("write_file", "read_file")
	require.NoError(t, err)
	require.Equal(t, "write_file", specs[0].Name)
	require.Equal(t, "read_file", specs[1].Name)
	_, err = tool.NewRegistry().Specs("read_file", "rm_rf")
	require.ErrorIs(t, err, tool.ErrUnknownTool)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry()
	cases := []struct {
		tool, args string
		problems   []string // each must appear in the error
	}{
		{"read_file", `{"path": 5}`, []string{`argument "path": got number, want string`}},
		{"read_file", `{}`, []string{`missing property 'path'`}},
		{"read_file", ``, []string{`missing property 'path'`}},
		{"read_file", `null`, []string{`got null, want object`}},
		{"read_file", `[]`, []string{`got array, want object`}},
		{"read_file", `{"path": "a", "offset": 0}`, []string{`argument "offset": minimum: got 0, want 1`}},
		{"read_file", `{"path": "a", "offset": 1.5}`, []string{`argument "offset": got number, want integer`}},
		{"read_file", `{"path": "a", "file": "b"}`, []string{`additional properties 'file' not allowed`}},
		{"write_file", `{"path": "a"}`, []string{`missing property 'content'`}},
		{"write_file", `{}`, []string{`missing properties 'path', 'content'`}},
		{"write_file", `{"path": ["a"], "content": 7}`, []string{`argument "path": got array, want string`, `argument "content": got number, want string`}},
		{"edit_file", `{"path": "a", "old_string": "", "new_string": "b"}`, []string{`argument "old_string": minLength: got 0, want 1`}},
		{"edit_file", `{"path": "a", "old_string": "x", "new_string": "b", "replace_all": "yes"}`, []string{`argument "replace_all": got string, want boolean`}},
		{"edit_file", `{"path": "a", "old_string": "x"}`, []string{`missing property 'new_string'`}},
		{"search_files", `{"path_prefix": "src"}`, []string{`missing property 'query'`}},
		{"search_files", `{"query": "x", "limit": 100000}`, []string{`argument "limit": maximum: got 100,000, want 500`}},
		{"list_files", `{"prefix": false}`, []string{`argument "prefix": got boolean, want string`}},
		{"delete_file", `{"path": "a"} {"path": "b"}`, []string{`not valid JSON`}},
		{"delete_file", `{"path": `, []string{`not valid JSON`}},
	}
	for _, c := range cases {
		err := r.Validate(c.tool, json.RawMessage(c.args))
		require.Error(t, err, "%s %s", c.tool, c.args)
		var ae *tool.ArgumentError
		require.True(t, errors.As(err, &ae), "%s %s: %v", c.tool, c.args, err)
		require.Equal(t, c.tool, ae.Tool)
		require.Equal(t, apperr.BadUserInput, apperr.CodeOf(err))
		require.True(t, strings.HasPrefix(err.Error(), "invalid arguments for "+c.tool+": "), err.Error())
		for _, p := range c.problems {
			require.Contains(t, err.Error(), p, "%s %s", c.tool, c.args)
		}
	}
	for name, args := range map[string]string{
		"read_file":    `{"path": "a", "offset": 3, "limit": 10}`,
		"write_file":   `{"path": "a", "content": ""}`,
		"edit_file":    `{"path": "a", "old_string": "x", "new_string": "", "replace_all": true}`,
		"search_files": `{"query": "x", "path_prefix": "src", "limit": 5}`,
		"list_files":   ``,
		"delete_file":  ` {"path": "a"} `,
	} {
		require.NoError(t, r.Validate(name, json.RawMessage(args)), "%s %s", name, args)
	}
}

func TestUnknownTool(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry()
	_, err := r.Get("rm_rf")
	require.ErrorIs(t, err, tool.ErrUnknownTool)
	require.Contains(t, err.Error(), `unknown tool "rm_rf"; the tools are: list_files, read_file, write_file, edit_file, search_files, delete_file`)
	require.ErrorIs(t, r.Validate("rm_rf", json.RawMessage(`{}`)), tool.ErrUnknownTool)
	_, err = r.Run(context.Background(), tool.Env{}, "rm_rf", json.RawMessage(`{}`))
	require.ErrorIs(t, err, tool.ErrUnknownTool)
}

type fakeTool struct{ spec llm.ToolSpec }

func (f fakeTool) Spec() llm.ToolSpec     { return f.spec }
func (fakeTool) Risk(json.RawMessage) int { return 0 }
func (fakeTool) ReadOnly() bool           { return true }
func (fakeTool) Run(context.Context, tool.Env, json.RawMessage) (tool.Result, error) {
	return tool.Result{Output: "ok"}, nil
}

func TestRegister(t *testing.T) {
	t.Parallel()
	r := tool.NewEmptyRegistry()
	ok := fakeTool{llm.ToolSpec{Name: "ok", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}
	require.NoError(t, r.Register(ok))
	require.ErrorContains(t, r.Register(ok), "already registered")
	require.ErrorContains(t, r.Register(fakeTool{llm.ToolSpec{Name: "", Parameters: json.RawMessage(`{"type":"object"}`)}}), "empty name")
	require.ErrorContains(t, r.Register(fakeTool{llm.ToolSpec{Name: "notjson", Parameters: json.RawMessage(`{`)}}), "not JSON")
	require.ErrorContains(t, r.Register(fakeTool{llm.ToolSpec{Name: "notobject", Parameters: json.RawMessage(`{"type":"string"}`)}}), `"type": "object"`)
	require.Error(t, r.Register(fakeTool{llm.ToolSpec{Name: "badschema", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integr"}}}`)}}))
	require.Equal(t, []string{"ok"}, r.Names())
	require.NoError(t, r.Validate("ok", json.RawMessage(`{"n": 3}`)))
	require.ErrorContains(t, r.Validate("ok", json.RawMessage(`{"n": "3"}`)), `argument "n": got string, want integer`)
	res, err := r.Run(context.Background(), tool.Env{}, "ok", json.RawMessage(`{"n": 3}`))
	require.NoError(t, err)
	require.Equal(t, "ok", res.Output)
	_, err = r.Run(context.Background(), tool.Env{}, "ok", json.RawMessage(`{"n": 3.5}`))
	var ae *tool.ArgumentError
	require.ErrorAs(t, err, &ae)
}

func TestRisk(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry()
	cases := []struct {
		tool, args string
		risk       int
	}{
		{"list_files", `{}`, 0},
		{"list_files", `{"prefix": ".ssh"}`, 0},
		{"read_file", `{"path": "src/main.go"}`, 5},
		{"read_file", `{"path": ".env"}`, 25},
		{"read_file", `{"path": ".git/config"}`, 5},
		{"search_files", `{"query": "x"}`, 5},
		{"search_files", `{"query": "x", "path_prefix": ".aws"}`, 25},
		{"edit_file", `{"path": "README.md", "old_string": "a", "new_string": "b"}`, 35},
		{"edit_file", `{"path": ".github/workflows/ci.yml", "old_string": "a", "new_string": "b"}`, 50},
		{"write_file", `{"path": "notes.md", "content": ""}`, 40},
		{"write_file", `{"path": ".env", "content": ""}`, 70},
		{"write_file", `{"path": "./config/.ENV.production", "content": ""}`, 70},
		{"write_file", `{"path": "certs/server.pem", "content": ""}`, 70},
		{"write_file", `{"path": "home/.ssh/authorized_keys", "content": ""}`, 70},
		{"write_file", `{"path": ".git/hooks/pre-commit", "content": ""}`, 65},
		{"write_file", `{"path": ".gitlab-ci.yml", "content": ""}`, 55},
		{"write_file", `{"path": ".gitignore", "content": ""}`, 40},
		{"write_file", `{"path": "environment.go", "content": ""}`, 40},
		{"delete_file", `{"path": "old.txt"}`, 70},
		{"delete_file", `{"path": "id_rsa"}`, 100},
		{"delete_file", `{"path": ".git/HEAD"}`, 95},
		// Arguments that cannot be read score as a secret.
		{"write_file", `not json`, 70},
		{"write_file", `{"path": 5}`, 70},
		{"write_file", `{"content": "x"}`, 70},
		{"delete_file", `{"path": "../../etc/passwd"}`, 100},
		{"read_file", `{"path": "/etc/passwd"}`, 25},
	}
	for _, c := range cases {
		tl, err := r.Get(c.tool)
		require.NoError(t, err)
		require.Equal(t, c.risk, tl.Risk(json.RawMessage(c.args)), "%s %s", c.tool, c.args)
	}
	require.Equal(t, tool.Secret, tool.PathSensitivity("a/B.KEY"))
	require.Equal(t, tool.VCS, tool.PathSensitivity(".svn/entries"))
	require.Equal(t, tool.Automation, tool.PathSensitivity("Jenkinsfile"))
	require.Equal(t, tool.Ordinary, tool.PathSensitivity(""))
	require.Equal(t, tool.Ordinary, tool.PathSensitivity("src/env.go"))
}
