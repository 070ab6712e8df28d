package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentry/agentry/internal/llm"
)

// Registry holds the tools an agent may be offered, by name, each with its compiled argument
// schema. The zero value is not usable; use NewRegistry or NewEmptyRegistry. It is safe for
// concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]entry
	order []string
}

type entry struct {
	tool   Tool
	schema *jsonschema.Schema
}

// NewRegistry returns a registry holding the built-in tools (Builtins). It panics only if a
// built-in tool's schema is broken, a programming error the tests catch.
func NewRegistry() *Registry {
	r := NewEmptyRegistry()
	for _, t := range Builtins() {
		if err := r.Register(t); err != nil {
			panic(err)
		}
	}
	return r
}

// NewEmptyRegistry returns a registry holding no tools.
func NewEmptyRegistry() *Registry {
	return &Registry{tools: map[string]entry{}}
}

// Register adds t. Its name must be new and non-empty, and its parameters must be a valid JSON
// schema (draft 2020-12 unless it says otherwise) for an object; the schema is compiled once,
// here.
func (r *Registry) Register(t Tool) error {
	spec := t.Spec()
	if spec.Name == "" {
		return errors.New("register tool: empty name")
	}
	schema, err := compileSchema(spec)
	if err != nil {
		return fmt.Errorf("register tool %s: %w", spec.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[spec.Name]; ok {
		return fmt.Errorf("register tool %s: already registered", spec.Name)
	}
	r.tools[spec.Name] = entry{tool: t, schema: schema}
	r.order = append(r.order, spec.Name)
	return nil
}

func compileSchema(spec llm.ToolSpec) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Parameters))
	if err != nil {
		return nil, fmt.Errorf("parameters are not JSON: %w", err)
	}
	if m, ok := doc.(map[string]any); !ok || m["type"] != "object" {
		return nil, errors.New(`parameters must be a JSON schema with "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	url := "agentry:tool/" + spec.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	schema, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	return schema, nil
}

// Get returns the tool named name, or an error wrapping ErrUnknownTool that lists the tools
// there are.
func (r *Registry) Get(name string) (Tool, error) {
	e, err := r.entry(name)
	return e.tool, err
}

func (r *Registry) entry(name string) (entry, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	if !ok {
		return entry{}, fmt.Errorf("%w %q; the tools are: %s", ErrUnknownTool, name, strings.Join(r.order, ", "))
	}
	return e, nil
}

// Names returns the registered tool names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Specs returns the specs of the named tools, in the order given, for a model request; with no
// names, every tool's in registration order. An unknown name is an error wrapping
// ErrUnknownTool.
func (r *Registry) Specs(names ...string) ([]llm.ToolSpec, error) {
	if len(names) == 0 {
		names = r.Names()
	}
	specs := make([]llm.ToolSpec, 0, len(names))
	for _, n := range names {
		e, err := r.entry(n)
		if err != nil {
			return nil, err
		}
		specs = append(specs, e.tool.Spec())
	}
	return specs, nil
}

// Validate checks args against the named tool's schema before the call runs. Empty args count
// as {}. It answers an error wrapping ErrUnknownTool for an unknown name and an *ArgumentError
// listing every problem (not JSON, missing properties, wrong types, unknown properties) for bad
// arguments.
func (r *Registry) Validate(name string, args json.RawMessage) error {
	e, err := r.entry(name)
	if err != nil {
		return err
	}
	return validate(name, e.schema, args)
}

// Run validates args and runs the named tool: the whole path of one call.
func (r *Registry) Run(ctx context.Context, env Env, name string, args json.RawMessage) (Result, error) {
	e, err := r.entry(name)
	if err != nil {
		return Result{}, err
	}
	if err := validate(name, e.schema, args); err != nil {
		return Result{}, err
	}
	return e.tool.Run(ctx, env, args)
}

var printer = message.NewPrinter(language.English)

func validate(name string, schema *jsonschema.Schema, args json.RawMessage) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &ArgumentError{Tool: name, Problems: []string{"arguments are not valid JSON: " + err.Error()}}
	}
	err = schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgumentError{Tool: name, Problems: []string{err.Error()}}
	}
	var problems []string
	collectProblems(ve, &problems)
	if len(problems) == 0 {
		problems = []string{ve.LocalizedError(printer)}
	}
	return &ArgumentError{Tool: name, Problems: problems}
}

// collectProblems lists the leaves of a validation error tree as "where: what".
func collectProblems(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectProblems(c, out)
		}
		return
	}
	where := "arguments"
	if len(ve.InstanceLocation) > 0 {
		where = fmt.Sprintf("argument %q", strings.Join(ve.InstanceLocation, "."))
	}
	p := where + ": " + ve.ErrorKind.LocalizedString(printer)
	if !slices.Contains(*out, p) {
		*out = append(*out, p)
	}
}
