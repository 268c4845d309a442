// Command modzip writes the zip of the module in a directory at a version, as a module proxy
// serves it, with its .mod, .info and list files: the layout a file:// GOPROXY reads.
// scripts/check-install.sh uses it to install Sluice as `go install …@version` would.
//
//	go run ./scripts/modzip -dir DIR -version v0.0.0-ci -proxy PROXYDIR
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", ".", "the module's root directory")
	version := flag.String("version", "v0.0.0-ci", "the version to serve it as")
	proxy := flag.String("proxy", "", "the proxy directory to write into")
	flag.Parse()
	if err := run(*dir, *version, *proxy); err != nil {
		fmt.Fprintln(os.Stderr, "modzip:", err)
		os.Exit(1)
	}
}

func run(dir, version, proxy string) error {
	if proxy == "" {
		return errors.New("-proxy is required")
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	mv := module.Version{Path: path, Version: version}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(proxy, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil { //nolint:gosec // G301: a module proxy's directory, for the go command to read
		return err
	}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(f, mv, dir); err != nil {
		_ = f.Close()
		return fmt.Errorf("zipping %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		version + ".mod":  gomod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil { //nolint:gosec // G306: a module proxy's file, for the go command to read
			return err
		}
	}
	return nil
}
