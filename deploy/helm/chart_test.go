// Package helm_test checks the chart in sluice/ offline: helm lint, then helm template with
// several sets of values, every rendered manifest decoded strictly (an unknown field is an
// error) into the Kubernetes API types, the invariants between them checked, and the
// configuration the chart writes validated and resolved by the sluice binary (the memory
// limit must hold what the edge's pools and store take).
//
// HELM names the helm binary (make test-deploy installs a pinned one); without it, helm on
// PATH; without either the tests are skipped. DEPLOY_SLUICE names a sluice binary for
// `sluice validate`; without it the test builds one from this repository.
package helm_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const chart = "sluice"

func TestChartLint(t *testing.T) {
	helm := helmBin(t)
	for _, set := range [][]string{nil, {"broker.url=pulsar://pulsar:6650", "serviceMonitor.enabled=true"}} {
		args := []string{"lint", "--strict", chart}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestChartRenders renders the chart with default and other values and checks each result.
func TestChartRenders(t *testing.T) {
	helm := helmBin(t)
	sluice := sluiceBin(t)
	for _, tc := range []struct {
		name           string
		set            []string
		brokerURL      string
		serviceMonitor bool
	}{
		{name: "defaults"},
		{
			name:      "pulsar",
			set:       []string{"broker.url=pulsar://pulsar:6650", "ports.admin=9090", "ports.websocket=9000", "shutdown.drainTimeoutSeconds=90", "replicaCount=3", "config.memory.producer_limit=128MiB"},
			brokerURL: "pulsar://pulsar:6650",
		},
		{name: "servicemonitor", set: []string{"serviceMonitor.enabled=true", "rollOnConfigChange=false"}, serviceMonitor: true},
		{name: "grace override", set: []string{"shutdown.terminationGracePeriodSeconds=120"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decode(t, render(t, helm, tc.set...))
			cfg := checkConfigMap(t, m, tc.brokerURL)
			validate(t, sluice, m.configMap.Data["sluice.yaml"])
			checkDeployment(t, m, cfg)
			checkMemory(t, sluice, m)
			checkService(t, m)
			if m.pdb == nil || m.pdb.Spec.MaxUnavailable == nil || !selects(t, m.pdb.Spec.Selector, m.deployment) {
				t.Error("no PodDisruptionBudget with maxUnavailable selecting the pods")
			}
			if m.serviceAccount == nil || m.serviceAccount.AutomountServiceAccountToken == nil || *m.serviceAccount.AutomountServiceAccountToken {
				t.Error("no ServiceAccount, or one that mounts its token")
			}
			checkServiceMonitor(t, m, tc.serviceMonitor)
		})
	}
}

// TestChartRefuses renders values the chart must refuse, each with a message naming the value.
func TestChartRefuses(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct{ set, want string }{
		{"config.listen=:9999", "set ports.websocket instead"},
		{"config.admin_listen=:9999", "set ports.admin instead"},
		{"config.shutdown.drain_timeout=5s", "set shutdown instead"},
		{"shutdown.terminationGracePeriodSeconds=40", "must exceed shutdown.gracePeriodSeconds + shutdown.drainTimeoutSeconds (40)"},
		{"resources.limits.memory=null", "resources.limits.memory is required"},
	} {
		out, err := exec.Command(helm, "template", "t", chart, "--set", tc.set).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte(tc.want)) {
			t.Errorf("--set %s: err %v, want an error containing %q:\n%s", tc.set, err, tc.want, out)
		}
	}
}

// sluiceConfig is the part of sluice.yaml the chart's invariants involve.
type sluiceConfig struct {
	Listen      string `json:"listen"`
	AdminListen string `json:"admin_listen"`
	Broker      struct {
		URL string `json:"url"`
	} `json:"broker"`
	Shutdown struct {
		GracePeriod  string `json:"grace_period"`
		DrainTimeout string `json:"drain_timeout"`
	} `json:"shutdown"`
}

func checkConfigMap(t *testing.T, m manifests, brokerURL string) sluiceConfig {
	t.Helper()
	var cfg sluiceConfig
	if err := yaml.Unmarshal([]byte(m.configMap.Data["sluice.yaml"]), &cfg); err != nil {
		t.Fatalf("ConfigMap sluice.yaml: %v", err)
	}
	if cfg.Broker.URL != brokerURL {
		t.Errorf("broker.url %q, want %q", cfg.Broker.URL, brokerURL)
	}
	return cfg
}

func checkDeployment(t *testing.T, m manifests, cfg sluiceConfig) {
	t.Helper()
	d := m.deployment
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !selects(t, d.Spec.Selector, d) {
		t.Error("the Deployment's selector does not select its pods")
	}

	// The probes reach the admin listener the configuration sets, at /healthz and /readyz.
	adminPort, wsPort := portOf(t, "admin_listen", cfg.AdminListen), portOf(t, "listen", cfg.Listen)
	checkPort(t, c, "websocket", wsPort)
	checkPort(t, c, "admin", adminPort)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: not an HTTP probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: path %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := resolvePort(t, c, p.probe.HTTPGet.Port); got != adminPort {
			t.Errorf("%s: port %d, want the admin port %d", p.name, got, adminPort)
		}
	}

	// Kubernetes waits for the drain: the grace period exceeds grace_period + drain_timeout.
	drain := duration(t, "shutdown.grace_period", cfg.Shutdown.GracePeriod) + duration(t, "shutdown.drain_timeout", cfg.Shutdown.DrainTimeout)
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v, want more than the drain's %s", pod.TerminationGracePeriodSeconds, drain)
	}

	// Non-root, read-only root filesystem, no privilege escalation.
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser 65532", psc)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want a read-only root filesystem and no privilege escalation", csc)
	}

	// A memory limit, which the edge's bound must fit under.
	if mem, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || mem.IsZero() {
		t.Error("no memory limit")
	}

	// The configuration file the arguments name is the ConfigMap's, mounted.
	if strings.Join(c.Args, " ") != "-c /etc/sluice/sluice.yaml" {
		t.Errorf("args %q, want -c /etc/sluice/sluice.yaml", c.Args)
	}
	if !mounts(pod, c, "/etc/sluice", func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == m.configMap.Name
	}) {
		t.Errorf("ConfigMap %s not mounted at /etc/sluice", m.configMap.Name)
	}
	if !mounts(pod, c, "/tmp", func(v corev1.Volume) bool { return v.EmptyDir != nil }) {
		t.Error("no writable /tmp beside the read-only root filesystem")
	}
}

// runtimeHeadroom is what `sluice serve` adds to its pools and store for the Go memory limit
// (cmd/sluice: RuntimeHeadroom).
const runtimeHeadroom = 128 << 20

// checkMemory: the container's memory limit holds the Go memory limit `sluice serve` sets,
// the pools + the embedded broker's store + the headroom, read from `sluice config` on the
// configuration the chart writes (so that every default is sluice's own).
func checkMemory(t *testing.T, sluice string, m manifests) {
	t.Helper()
	limit := m.deployment.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	var resolved struct {
		Broker struct {
			URL      string `json:"url"`
			Embedded struct {
				StoreLimit string `json:"store_limit"`
			} `json:"embedded"`
		} `json:"broker"`
		Memory struct {
			ProducerLimit string `json:"producer_limit"`
			ConsumerLimit string `json:"consumer_limit"`
			SessionLimit  string `json:"session_limit"`
		} `json:"memory"`
	}
	f := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(f, []byte(m.configMap.Data["sluice.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sluice, "config", "-c", f)
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sluice config: %v", err)
	}
	if err := yaml.Unmarshal(out, &resolved); err != nil {
		t.Fatalf("sluice config: %v\n%s", err, out)
	}
	pools := []string{resolved.Memory.ProducerLimit, resolved.Memory.ConsumerLimit, resolved.Memory.SessionLimit}
	if resolved.Broker.URL == "" {
		pools = append(pools, resolved.Broker.Embedded.StoreLimit)
	}
	need := int64(runtimeHeadroom)
	for _, p := range pools {
		n := size(t, p)
		if n == 0 {
			return // an unbounded pool: sluice sets no memory limit of its own
		}
		need += n
	}
	if limit.Value() < need {
		t.Errorf("memory limit %s is below the %d MiB the edge's pools, store and headroom take", limit.String(), need>>20)
	}
}

// size parses a sluice size (64MiB, 16MB, 1024) as a Kubernetes quantity, which has the same
// suffixes without the B.
func size(t *testing.T, s string) int64 {
	t.Helper()
	q, err := resource.ParseQuantity(strings.TrimSuffix(s, "B"))
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	return q.Value()
}

// checkService: the Service selects the pods and exposes the WebSocket and admin ports.
func checkService(t *testing.T, m manifests) {
	t.Helper()
	pod := m.deployment.Spec.Template
	if !labels.SelectorFromSet(m.service.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("Service selector %v does not match the pods' labels %v", m.service.Spec.Selector, pod.Labels)
	}
	c := pod.Spec.Containers[0]
	for _, name := range []string{"websocket", "admin"} {
		var found bool
		for _, p := range m.service.Spec.Ports {
			if p.Name == name {
				found = true
				if resolvePort(t, c, p.TargetPort) == 0 {
					t.Errorf("Service port %s: target %s is no container port", name, p.TargetPort.String())
				}
			}
		}
		if !found {
			t.Errorf("Service has no %s port", name)
		}
	}
}

func checkServiceMonitor(t *testing.T, m manifests, want bool) {
	t.Helper()
	if m.serviceMonitor == nil {
		if want {
			t.Error("no ServiceMonitor")
		}
		return
	}
	if !want {
		t.Fatal("a ServiceMonitor rendered although serviceMonitor.enabled is false")
	}
	sm := m.serviceMonitor
	if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(m.service.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not match the Service's labels", sm.Spec.Selector.MatchLabels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on the admin port", sm.Spec.Endpoints)
	}
}

// manifests are the objects one rendering holds; the optional ones are nil when absent.
type manifests struct {
	deployment     appsv1.Deployment
	service        corev1.Service
	configMap      corev1.ConfigMap
	serviceAccount *corev1.ServiceAccount
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *monitoringv1.ServiceMonitor
}

// decode splits helm template's output into documents and decodes each strictly into the API
// type its apiVersion and kind name: an unknown or duplicate field fails the test, and so does
// a kind the chart is not expected to render.
func decode(t *testing.T, out []byte) manifests {
	t.Helper()
	var m manifests
	seen := map[string]int{}
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if tm.Kind == "" {
			continue // a document holding only comments
		}
		gvk := tm.APIVersion + "/" + tm.Kind
		seen[gvk]++
		var target any
		switch gvk {
		case "apps/v1/Deployment":
			target = &m.deployment
		case "v1/Service":
			target = &m.service
		case "v1/ConfigMap":
			target = &m.configMap
		case "v1/ServiceAccount":
			m.serviceAccount = new(corev1.ServiceAccount)
			target = m.serviceAccount
		case "policy/v1/PodDisruptionBudget":
			m.pdb = new(policyv1.PodDisruptionBudget)
			target = m.pdb
		case "monitoring.coreos.com/v1/ServiceMonitor":
			m.serviceMonitor = new(monitoringv1.ServiceMonitor)
			target = m.serviceMonitor
		default:
			t.Fatalf("unexpected object %s:\n%s", gvk, doc)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Errorf("%s: %v\n%s", gvk, err, doc)
		}
	}
	for gvk, n := range seen {
		if n > 1 {
			t.Errorf("%d objects of %s, want one", n, gvk)
		}
	}
	for _, gvk := range []string{"apps/v1/Deployment", "v1/Service", "v1/ConfigMap"} {
		if seen[gvk] == 0 {
			t.Errorf("no %s rendered", gvk)
		}
	}
	return m
}

func render(t *testing.T, helm string, set ...string) []byte {
	t.Helper()
	args := []string{"template", "t", chart, "--namespace", "edge"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return out
}

// validate runs `sluice validate` on the configuration the chart wrote.
func validate(t *testing.T, sluice, config string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(f, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sluice, "validate", "-c", f)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sluice validate: %v\n%s\nconfiguration:\n%s", err, out, config)
	}
}

// cleanEnv is the environment without SLUICE_ variables, which sluice would read as settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

func checkPort(t *testing.T, c corev1.Container, name string, want int32) {
	t.Helper()
	if got := resolvePort(t, c, intstr.FromString(name)); got != want {
		t.Errorf("container port %s = %d, want %d (from the configuration)", name, got, want)
	}
}

// resolvePort is the container port p designates, by name or number; 0 if none.
func resolvePort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

// mounts reports whether c mounts, at path, a volume of pod that is matches.
func mounts(pod corev1.PodSpec, c corev1.Container, path string, is func(corev1.Volume) bool) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != path {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && is(v) {
				return true
			}
		}
	}
	return false
}

func selects(t *testing.T, sel *metav1.LabelSelector, d appsv1.Deployment) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(d.Spec.Template.Labels))
}

func portOf(t *testing.T, key, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	return int32(n)
}

func duration(t *testing.T, key, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s %q: %v", key, s, err)
	}
	return d
}

// helmBin is HELM, else helm on PATH; the test is skipped without one.
func helmBin(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := exec.LookPath("helm")
	if err != nil {
		t.Skip("no helm: set HELM (make test-deploy installs a pinned helm)")
	}
	return h
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
	buildDir  string
)

// sluiceBin is DEPLOY_SLUICE, else a sluice built once from this repository.
func sluiceBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("DEPLOY_SLUICE"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "sluice-chart-test")
		if buildErr != nil {
			return
		}
		built = filepath.Join(buildDir, "sluice")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/sluice")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
