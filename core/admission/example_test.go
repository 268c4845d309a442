package admission_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/admission"
)

func Example() {
	// The process-wide producer pool, a route with a reservation, and one
	// session's gate.
	edge, err := admission.NewPool(admission.PoolConfig{Name: "producer", Limit: 64 << 20})
	if err != nil {
		panic(err)
	}
	route, err := edge.Route(admission.RouteConfig{Name: "iot", Cap: 32 << 20, Reserve: 8 << 20})
	if err != nil {
		panic(err)
	}
	gate, err := route.Gate(admission.GateConfig{MaxMessages: 2})
	if err != nil {
		panic(err)
	}

	// on_full=reject: TryAcquire, and an error ack when refused.
	var charges []*admission.Charge
	for range 3 {
		c, err := gate.TryAcquire(1024)
		if err != nil {
			fmt.Println("send-error:8", err)
			continue
		}
		charges = append(charges, c)
	}

	// on_full=pause: Acquire with max_pause as the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := gate.Acquire(ctx, 1024); errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("paused too long:", err)
	}

	// The receipts arrive.
	for _, c := range charges {
		c.Release()
	}
	fmt.Println("edge bytes in use:", edge.Snapshot().Edge.Used)
	// Output:
	// send-error:8 producer pending messages limit of 2 messages reached
	// paused too long: producer pending messages limit of 2 messages reached: context deadline exceeded
	// edge bytes in use: 0
}
