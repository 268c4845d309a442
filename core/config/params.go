package config

import (
	"fmt"
	"strconv"
)

// ParamPolicy is a route's policy for one numeric client parameter, such as
// maxPendingMessages on a producer or receiverQueueSize on a consumer.
// Pulsar passes these to its client as given; several read 0 as "unbounded",
// so the edge decides what a client may ask for.
type ParamPolicy struct {
	// Default is used when the client does not send the parameter.
	// Required.
	Default *int `koanf:"default" json:"default"`
	// Min is the smallest positive value allowed. Absent (nil) means no
	// lower bound.
	Min *int `koanf:"min" json:"min"`
	// Max is the largest value allowed. Absent (nil) means no upper bound.
	Max *int `koanf:"max" json:"max"`
	// Zero is the action for a client value of 0: reject, clamp (raise it
	// to Min, which must be set) or accept. Empty means reject.
	Zero ParamAction `koanf:"zero" json:"zero"`
	// Negative is the action for a negative client value: reject, clamp
	// (raise it to Min, which must be set) or accept. Empty means reject.
	Negative ParamAction `koanf:"negative" json:"negative"`
	// OutOfRange is the action for a positive value outside [Min, Max]: clamp
	// or reject. Empty means clamp, as Pulsar's proxy caps receiverQueueSize
	// at 1000.
	OutOfRange ParamAction `koanf:"out_of_range" json:"out_of_range"`
}

// ParamAction is what a ParamPolicy does with a value it does not allow as is.
type ParamAction string

// ParamAction values.
const (
	// ParamReject refuses the handshake (the gateway answers HTTP 400).
	ParamReject ParamAction = "reject"
	// ParamClamp replaces the value with the nearest bound.
	ParamClamp ParamAction = "clamp"
	// ParamAccept passes the value on as given, bounds unchecked.
	ParamAccept ParamAction = "accept"
)

// ParamError is a client parameter value that a ParamPolicy rejects. The
// gateway answers it with HTTP 400 and Error as the message.
type ParamError struct {
	Param string // the query parameter name
	Value int    // the value the client sent
	Min   *int   // the policy's bounds, nil when unbounded
	Max   *int
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("client parameter %s=%d is not allowed: %s", e.Param, e.Value, allowedRange(e.Min, e.Max))
}

func allowedRange(lo, hi *int) string {
	switch {
	case lo != nil && hi != nil:
		return "must be between " + strconv.Itoa(*lo) + " and " + strconv.Itoa(*hi)
	case lo != nil:
		return "must be at least " + strconv.Itoa(*lo)
	case hi != nil:
		return "must be between 1 and " + strconv.Itoa(*hi)
	default:
		return "must be positive"
	}
}

// Resolve applies the policy to the value a client sent for the parameter
// name (nil: the client sent none) and returns the value to use. A rejected
// value is a *ParamError naming the parameter and the allowed range.
//
// An omitted parameter gets Default. A positive value within [Min, Max] is
// used as given; outside it, OutOfRange applies. Zero and negative values
// follow Zero and Negative: reject, clamp (to Min), or accept.
func (p ParamPolicy) Resolve(name string, given *int) (int, error) {
	if given == nil {
		if p.Default == nil {
			return 0, fmt.Errorf("client parameter %s: policy has no default", name)
		}
		return *p.Default, nil
	}
	v := *given
	var action ParamAction
	switch {
	case v < 0:
		action = orAction(p.Negative, ParamReject)
	case v == 0:
		action = orAction(p.Zero, ParamReject)
	case p.Min != nil && v < *p.Min, p.Max != nil && v > *p.Max:
		action = orAction(p.OutOfRange, ParamClamp)
	default:
		return v, nil
	}
	switch action {
	case ParamAccept:
		return v, nil
	case ParamClamp:
		switch {
		case p.Max != nil && v > *p.Max:
			return *p.Max, nil
		case p.Min != nil && v < *p.Min:
			return *p.Min, nil
		}
		// A zero or negative value with no lower bound to clamp to:
		// Validate forbids this, so treat it as a rejection.
	}
	return 0, &ParamError{Param: name, Value: v, Min: p.Min, Max: p.Max}
}

func orAction(a, zero ParamAction) ParamAction {
	if a == "" {
		return zero
	}
	return a
}
