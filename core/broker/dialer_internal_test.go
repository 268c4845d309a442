package broker

import (
	"context"
	"net"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestSetDialer: the Dialer reaches pulsar-client-go's options when the build's library has the
// field (third_party's copy, which go.mod uses), and is reported missing otherwise, as in a
// program built against upstream v0.19.0.
func TestSetDialer(t *testing.T) {
	called := false
	d := func(context.Context, string, string) (net.Conn, error) {
		called = true
		return nil, net.ErrClosed
	}
	var o pulsar.ClientOptions
	if !setDialer(&o, d) {
		t.Fatal("setDialer refused pulsar.ClientOptions: is go.mod's replace of pulsar-client-go gone?")
	}
	if o.Dialer == nil {
		t.Fatal("Dialer not set")
	}
	_, _ = o.Dialer(context.Background(), "tcp", "127.0.0.1:6650")
	if !called {
		t.Fatal("the Dialer set is not the one given")
	}

	var upstream struct{ URL string }
	if setDialer(&upstream, d) {
		t.Fatal("setDialer accepted options without a Dialer field")
	}
	type namedDialer func(context.Context, string, string) (net.Conn, error)
	var named struct{ Dialer namedDialer }
	if !setDialer(&named, d) || named.Dialer == nil {
		t.Fatal("setDialer refused a Dialer field of a named func type")
	}
	var otherType struct {
		Dialer func(string) (net.Conn, error)
	}
	if setDialer(&otherType, d) {
		t.Fatal("setDialer accepted a Dialer field of another type")
	}
}
