package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The script's state directory: the env file's URLs and token, the broker's pid, and no
// proxy when proxy.pid names a process that is gone.
func TestOpenPulsar(t *testing.T) {
	dir := t.TempDir()
	env := "export SLUICE_PULSAR_URL=pulsar://127.0.0.1:6670\nexport SLUICE_PULSAR_HTTP=http://127.0.0.1:18280\n" +
		"export SLUICE_PULSAR_WS=ws://127.0.0.1:18280\nexport SLUICE_PULSAR_TOKEN=abc.def\n" +
		"export SLUICE_PULSAR_PROXY_WS=ws://127.0.0.1:18290\n"
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("env", env)
	if _, err := openPulsar(dir); err == nil {
		t.Fatal("no standalone.pid: want an error")
	}
	write("standalone.pid", strconv.Itoa(os.Getpid())+"\n")
	write("proxy.pid", "999999999\n")
	p, err := openPulsar(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.serviceURL != "pulsar://127.0.0.1:6670" || p.httpURL != "http://127.0.0.1:18280" || p.brokerWS != "ws://127.0.0.1:18280" ||
		p.token != "abc.def" || p.brokerPID != os.Getpid() {
		t.Errorf("got %+v", p)
	}
	if p.proxyPID != 0 || p.proxyWS != "" {
		t.Errorf("a proxy whose pid is gone: pid %d, url %q", p.proxyPID, p.proxyWS)
	}
}

func TestParsePulsarKinds(t *testing.T) {
	kinds, err := parsePulsarKinds("pulsar-proxy, sluice,direct,")
	if err != nil || len(kinds) != 3 || kinds[1] != "sluice" {
		t.Errorf("got %v, %v", kinds, err)
	}
	for _, bad := range []string{"", "edge", "sluice,nats"} {
		if _, err := parsePulsarKinds(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
