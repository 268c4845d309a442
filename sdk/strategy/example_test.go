package strategy_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// fixed admits every producer with a fixed message bound, decoded strictly from its params.
type fixed struct{ max int }

func newFixed(_ context.Context, params map[string]any) (strategy.Strategy, error) {
	var p struct {
		MaxPendingMessages int           `json:"max_pending_messages"`
		SessionLimit       strategy.Size `json:"session_limit"`
	}
	if err := strategy.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	return fixed{max: p.MaxPendingMessages}, nil
}

func (f fixed) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingMessages: f.max}, nil
}

func (f fixed) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

func ExampleRegistry() {
	reg := strategy.NewRegistry()
	if err := reg.Register("fixed", newFixed); err != nil {
		panic(err)
	}
	ctx := context.Background()
	s, err := reg.New(ctx, "fixed", map[string]any{"max_pending_messages": 50})
	if err != nil {
		panic(err)
	}
	d, _ := s.OpenProducer(ctx, strategy.ProducerRequest{Route: "iot"})
	fmt.Println(d.MaxPendingMessages)

	// Parameters are decoded strictly: a misspelt one is an error.
	_, err = reg.New(ctx, "fixed", map[string]any{"max_pending_mesages": 50})
	fmt.Println(err)
	_, err = reg.New(ctx, "nosuch", nil)
	fmt.Println(err)
	// Output:
	// 50
	// strategy "fixed": strategy params: unknown parameter "max_pending_mesages"
	// strategy "nosuch": unknown strategy (known: [fixed])
}

func ExampleParseSize() {
	for _, s := range []string{"64MiB", "16MB", "1024"} {
		n, _ := strategy.ParseSize(s)
		fmt.Println(n.Bytes())
	}
	// Output:
	// 67108864
	// 16000000
	// 1024
}

// A strategy decides on who is asking: here a role that is refused, and a role with a
// larger bound.
func ExampleProducerRequest_role() {
	decide := func(req strategy.ProducerRequest) strategy.ProducerDecision {
		switch {
		case req.Role == "guest" && req.AuthMethod == strategy.AuthAnonymous:
			return strategy.ProducerDecision{Deny: strategy.Deny(http.StatusForbidden, "anonymous clients may not publish to %s", req.Topic)}
		case req.Role == "ingest":
			return strategy.ProducerDecision{MaxPendingMessages: 10000}
		}
		return strategy.ProducerDecision{MaxPendingMessages: 100}
	}
	for _, req := range []strategy.ProducerRequest{
		{Topic: "persistent://public/default/t", Role: "guest", AuthMethod: strategy.AuthAnonymous},
		{Topic: "persistent://public/default/t", Role: "ingest", AuthMethod: strategy.AuthToken},
		{Topic: "persistent://public/default/t"}, // no authentication
	} {
		d := decide(req)
		if d.Deny != nil {
			fmt.Println(d.Deny.Status, d.Deny.Reason)
			continue
		}
		fmt.Println(d.MaxPendingMessages)
	}
	// Output:
	// 403 anonymous clients may not publish to persistent://public/default/t
	// 10000
	// 100
}

func ExampleParseOnFull() {
	for _, s := range []string{"pause", "", "drop"} {
		o, err := strategy.ParseOnFull(s)
		fmt.Printf("%q valid=%v or-reject=%s err=%v\n", o, o.Valid(), o.Or(strategy.Reject), err)
	}
	// Output:
	// "pause" valid=true or-reject=pause err=<nil>
	// "" valid=false or-reject=reject err=<nil>
	// "" valid=false or-reject=reject err=on_full "drop": want reject or pause
}
