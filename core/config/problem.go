package config

import (
	"errors"
	"strings"
)

// SourceKind is the kind of layer a setting came from.
type SourceKind int

// The layers, lowest first.
const (
	FromDefault SourceKind = iota
	FromCgroup             // memory.limit, from the process's cgroup (LoadOptions.CgroupLimit)
	FromFile
	FromEnv
	FromFlag
)

// Source is where a setting came from: a default, a file (Name is its path), an environment
// variable (Name is the variable) or a flag (Name is the key path the flag set).
type Source struct {
	Kind SourceKind
	Name string
}

// String names the source for people: "default", "file m1.yaml", "env SLUICE_LISTEN",
// "flag".
func (s Source) String() string {
	switch s.Kind {
	case FromFile:
		return "file " + s.Name
	case FromEnv:
		return "env " + s.Name
	case FromFlag:
		return "flag"
	case FromCgroup:
		return "cgroup"
	}
	return "default"
}

// Problem is one thing wrong with a configuration: a key path (empty when the problem
// concerns no single key), what is wrong with it, and the layer that set the key. Load and
// Validate return their problems joined with errors.Join; Explain formats them with their
// sources.
type Problem struct {
	Path   string
	Msg    string
	Source Source
}

// Error is "path: msg". A problem set by an environment variable starts with the variable's
// name, since nothing else says where to look; a file's problem does not name the file,
// which its caller knows (Explain adds it).
func (p *Problem) Error() string {
	var b strings.Builder
	if p.Source.Kind == FromEnv {
		b.WriteString(p.Source.Name + ": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Explain formats err for a person. Each configuration problem in it goes on its own line
// with where its key was set: "m1.yaml: listen: must be host:port",
// "SLUICE_LISTEN: listen: must be host:port". Other errors are returned as they are.
func Explain(err error) string {
	if err == nil {
		return ""
	}
	ps := Problems(err)
	if ps == nil {
		return err.Error()
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
		switch p.Source.Kind {
		case FromFile:
			lines[i] = p.Source.Name + ": " + lines[i]
		case FromFlag:
			lines[i] = "flag: " + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// Problems returns the problems err joins, or nil when err holds anything that is not a
// *Problem.
func Problems(err error) []*Problem {
	var out []*Problem
	var walk func(error) bool
	walk = func(e error) bool {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				if !walk(e) {
					return false
				}
			}
			return true
		}
		var p *Problem
		if !errors.As(e, &p) || p != e { //nolint:errorlint // a bare *Problem only; a wrapped one is not a leaf
			return false
		}
		out = append(out, p)
		return true
	}
	if !walk(err) {
		return nil
	}
	return out
}

// problemf returns a Problem about path.
func problemf(path, msg string) *Problem { return &Problem{Path: path, Msg: msg} }

// joinProblems joins ps into one error; nil when there are none.
func joinProblems(ps []*Problem) error {
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}
