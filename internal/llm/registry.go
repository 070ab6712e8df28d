package llm

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Registry maps provider names ("anthropic", "openai", "demo") to Providers. It is safe for
// concurrent use. Package providers builds the one agentry runs with from its configuration.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
}

// NewRegistry returns a registry holding ps.
func NewRegistry(ps ...Provider) *Registry {
	r := &Registry{providers: map[string]Provider{}}
	for _, p := range ps {
		r.Register(p)
	}
	return r
}

// Register adds p under p.Name(), replacing any provider of that name.
func (r *Registry) Register(p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.providers == nil {
		r.providers = map[string]Provider{}
	}
	r.providers[p.Name()] = p
}

// Provider returns the provider named name.
func (r *Registry) Provider(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.providers[name]
	return p, ok
}

// Names returns the registered provider names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ModelLister is implemented by a provider that has a fixed set of models (the demo): Resolve
// refuses any other model of it.
type ModelLister interface {
	// Models returns the provider's model ids (without the provider's prefix).
	Models() []string
}

// Resolve turns "provider:model" into its provider and catalogue entry (Lookup). A malformed
// reference or a provider that is not configured is a TERMINAL *Error naming the configured
// providers; a model that a ModelLister provider does not have is one naming its models.
func (r *Registry) Resolve(ref string) (Provider, Model, error) {
	name, model, err := ParseModelRef(ref)
	if err != nil {
		return nil, Model{}, &Error{Class: Terminal, Message: err.Error(), Err: err}
	}
	p, ok := r.Provider(name)
	if !ok {
		configured := "none"
		if names := r.Names(); len(names) > 0 {
			configured = strings.Join(names, ", ")
		}
		return nil, Model{}, &Error{Class: Terminal, Provider: name,
			Message: fmt.Sprintf("model %q: provider %q is not configured (configured providers: %s)", ref, name, configured)}
	}
	if l, ok := p.(ModelLister); ok && !slices.Contains(l.Models(), model) {
		refs := make([]string, 0, len(l.Models()))
		for _, m := range l.Models() {
			refs = append(refs, name+":"+m)
		}
		return nil, Model{}, &Error{Class: Terminal, Provider: name,
			Message: fmt.Sprintf("model %q: the %s provider has no such model (it has %s)", ref, name, strings.Join(refs, ", "))}
	}
	return p, Lookup(name, model), nil
}
