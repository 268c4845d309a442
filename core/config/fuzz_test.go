package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzConfigLoad feeds arbitrary bytes to Load as a YAML file, with one
// arbitrary environment variable: it must never panic, and whatever it
// accepts must validate.
func FuzzConfigLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.txtar")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		for _, sec := range parseArchive(string(b)).sections {
			if filepath.Ext(sec.name) == ".yaml" {
				f.Add([]byte(sec.body), "SLUICE_LISTEN=:1")
			}
		}
	}
	f.Add([]byte("routes: [{name: a, match: /**, strategy: {name: x}, client_params: {maxPendingMessages: {default: 1}}}]"), "SLUICE_ROUTES=[]")
	f.Add([]byte("memory: {producer_limit: 1e30}"), "SLUICE_MEMORY__PRODUCER_LIMIT=9223372036854775807PiB")
	f.Add([]byte("a: &x [*x]"), "SLUICE_PLUGINS={1: 2}")
	f.Add([]byte("? [a]\n: b\n"), "SLUICE_=x")
	f.Add([]byte("listen: :1"), "SLUICE_ENV_IGNORE=SLUICE_A*, ,URL,SLUICE_*")
	f.Add([]byte("listen: :1"), "SLUICE_LISTN=:1")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		file, err := os.CreateTemp(dir, "fuzz-*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Remove(file.Name()) }()
		if _, err := file.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(t.Context(), LoadOptions{Files: []string{file.Name()}, Env: []string{env}})
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load accepted a config that does not validate: %v", err)
		}
	})
}
