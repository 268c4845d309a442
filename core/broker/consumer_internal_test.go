package broker

import (
	"context"
	"errors"
	"math"
	"testing"
)

// A priority level the broker cannot take is refused before the client library sees it.
func TestSubscribeRefusesPriorityLevelOutOfRange(t *testing.T) {
	t.Parallel()
	var c Client
	levels := []int{-1}
	if big := int64(math.MaxInt32) + 1; int64(int(big)) == big { // int has 64 bits
		levels = append(levels, int(big))
	}
	for _, level := range levels {
		_, err := c.Subscribe(context.Background(), ConsumerOptions{Topic: "t", Subscription: "s", PriorityLevel: level})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("priority level %d: %v, want ErrInvalidArgument", level, err)
		}
	}
}
