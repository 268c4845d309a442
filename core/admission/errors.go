package admission

import (
	"errors"
	"fmt"
)

// Layer names one of the three admission layers in a [LimitError] or a
// [LayerStats].
type Layer string

// The layers, outermost first.
const (
	LayerEdge     Layer = "edge"     // the process-wide pool
	LayerRoute    Layer = "route"    // one route's pool
	LayerProducer Layer = "producer" // one producer session's gate
	LayerConsumer Layer = "consumer" // one consumer or reader session's gate
)

// Unit is what a limit counts.
type Unit string

// The units of a limit.
const (
	UnitBytes    Unit = "bytes"
	UnitMessages Unit = "messages"
)

// ErrInvalid is wrapped by every configuration error: a negative limit, a
// watermark out of range, reservations beyond the edge limit.
var ErrInvalid = errors.New("invalid admission setting")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// LimitError reports that a charge was not admitted: which layer refused it,
// the unit and limit that was hit, and the layer's usage at that moment. Its
// message is meant for a Pulsar error ack's errorMsg, for example
// "edge producer memory limit of 67108864 bytes reached".
//
// For LayerEdge, Limit is the edge limit L and Used the whole edge's usage,
// even when what refused was the shared remainder left by route reservations.
//
// [Gate.TryAcquire] returns a LimitError with a nil Err. [Gate.Acquire]
// returns one whose Err is the context's error when the wait ended without
// admission, so errors.Is(err, context.DeadlineExceeded) reports a max_pause
// expiry.
type LimitError struct {
	Layer Layer
	Name  string // pool name for LayerEdge, route name for LayerRoute, empty for a gate
	Unit  Unit
	Limit int64
	Used  int64
	// Held is, for a refusal by the edge's fair share, what the refused session holds of the
	// edge; zero otherwise.
	Held int64
	Err  error // context error if a wait ended unadmitted; nil otherwise
}

func (e *LimitError) Error() string {
	var b []byte
	b = append(b, e.Layer...)
	if e.Name != "" {
		b = append(b, ' ')
		b = append(b, e.Name...)
	}
	switch {
	case e.Unit == UnitMessages:
		b = fmt.Appendf(b, " pending messages limit of %d messages reached", e.Limit)
	case e.Held > 0:
		b = fmt.Appendf(b, " memory limit of %d bytes reached for this session: it holds %d bytes of it, more than it would leave to the others (fair share past half of the pool)", e.Limit, e.Held)
	default:
		b = fmt.Appendf(b, " memory limit of %d bytes reached", e.Limit)
	}
	if e.Err != nil {
		b = append(b, ": "...)
		b = append(b, e.Err.Error()...)
	}
	return string(b)
}

// Unwrap returns the context error that ended a wait, if any.
func (e *LimitError) Unwrap() error { return e.Err }
