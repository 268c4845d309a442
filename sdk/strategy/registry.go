package strategy

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Registry maps strategy names to factories. Pass it by value to whatever needs it: there is
// no global registry. The zero Registry is not usable; call NewRegistry.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a factory under name. Names are short lowercase words; registering a name
// twice is an error.
func (r *Registry) Register(name string, f Factory) error {
	if !validName(name) {
		return fmt.Errorf("registering strategy %q: name must be lowercase letters, digits, '-' or '_'", name)
	}
	if f == nil {
		return fmt.Errorf("registering strategy %q: nil factory", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.factories[name]; dup {
		return fmt.Errorf("registering strategy %q: already registered", name)
	}
	r.factories[name] = f
	return nil
}

// New creates the named strategy from its raw parameters, passing ctx to its Factory. An
// unknown name is ErrUnknown.
func (r *Registry) New(ctx context.Context, name string, params map[string]any) (Strategy, error) {
	r.mu.RLock()
	f, ok := r.factories[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("strategy %q: %w (known: %v)", name, ErrUnknown, r.Names())
	}
	s, err := f(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("strategy %q: %w", name, err)
	}
	return s, nil
}

// Factory returns the factory registered under name.
func (r *Registry) Factory(name string) (Factory, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.factories[name]
	return f, ok
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.factories[name]
	return ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
