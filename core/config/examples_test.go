package config

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestExampleFile loads the annotated example configuration.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join("..", "..", "examples", "config", "sluice.yaml")
	cfg, err := Load(t.Context(), LoadOptions{Files: []string{file}})
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	// The example documents the defaults: it must resolve to the same
	// static settings as an empty file.
	def := Defaults()
	cfg.Memory, def.Memory = sansProvenance(cfg.Memory), sansProvenance(def.Memory)
	for _, f := range []struct {
		key       string
		got, want any
	}{
		{"listen", cfg.Listen, def.Listen},
		{"admin_listen", cfg.AdminListen, def.AdminListen},
		{"broker", cfg.Broker, def.Broker},
		{"memory", cfg.Memory, def.Memory},
		{"websocket", cfg.WebSocket, def.WebSocket},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s = %+v, want the default %+v", f.key, f.got, f.want)
		}
	}
	if len(cfg.Routes) != 2 || len(cfg.Plugins) != 1 {
		t.Errorf("routes %d, plugins %d", len(cfg.Routes), len(cfg.Plugins))
	}
}
