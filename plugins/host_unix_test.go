//go:build unix

package plugins_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// TestHang: a strategy that never answers holds a call only until its ctx's deadline, and
// a plugin process that stops answering altogether (SIGSTOP) is marked down and replaced.
func TestHang(t *testing.T) {
	t.Parallel()
	states := newStateLog()
	h := startHost(t, []plugins.Spec{helperSpec("h", "builtin")},
		plugins.WithHealthCheck(200*time.Millisecond, 300*time.Millisecond),
		plugins.WithBackoff(50*time.Millisecond, 2*time.Second),
		plugins.OnStateChange(states.record))
	hung, err := factory(t, h, "h", "hang")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStrategy(hung)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	_, err = hung.OpenProducer(ctx, strategy.ProducerRequest{})
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung call = %v, want context.DeadlineExceeded", err)
	}
	if took > time.Second {
		t.Errorf("hung call returned after %v, want about its 200ms deadline", took)
	}
	if st, _ := h.State("h"); st.Status != plugins.Healthy {
		t.Errorf("a hung strategy made the plugin %s; only that call should fail", st.Status)
	}

	before, _ := h.State("h")
	if err := syscall.Kill(before.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	down := states.await(t, plugins.Down, 5*time.Second)
	t.Logf("stopped plugin marked down after %v: %v", time.Since(stopped), down.Err)
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	if _, err := hung.OpenConsumer(ctx, strategy.ConsumerRequest{}); !errors.Is(err, plugins.ErrPluginDown) {
		t.Errorf("call while down = %v, want ErrPluginDown", err)
	}
	cancel()
	after := states.await(t, plugins.Healthy, 20*time.Second)
	if after.Pid == before.Pid {
		t.Errorf("the stopped process %d was not replaced", before.Pid)
	}
	if _, err := hung.OpenConsumer(context.Background(), strategy.ConsumerRequest{}); err != nil {
		t.Errorf("call after restart: %v", err)
	}
}

func TestCloseStopsPlugins(t *testing.T) {
	t.Parallel()
	h := startHost(t, []plugins.Spec{helperSpec("a", "builtin"), helperSpec("b", "builtin")})
	var pids []int
	var sockets []string
	for _, st := range h.Plugins() {
		pids = append(pids, st.Pid)
		sockets = append(sockets, socketDir(t, st.Pid))
	}
	s, err := factory(t, h, "a", "count")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, p := range pids {
		if err := syscall.Kill(p, 0); err == nil {
			t.Errorf("plugin process %d still running after Close", p)
		}
	}
	for _, dir := range sockets {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket directory %s after Close: %v, want it gone", dir, err)
		}
	}
	if _, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{}); !errors.Is(err, plugins.ErrClosed) {
		t.Errorf("call after Close = %v, want ErrClosed", err)
	}
	for _, st := range h.Plugins() {
		if st.Status != plugins.Stopped {
			t.Errorf("%s: %s after Close, want stopped", st.Name, st.Status)
		}
	}
}
