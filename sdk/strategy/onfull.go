package strategy

import "fmt"

// OnFull is what a producer session does with a message that finds a limit full. It is the
// one at-limit type of Sluice: a route's on_full setting, a strategy's decision and a
// session's action are all an OnFull.
//
// The zero OnFull is unset: in a ProducerDecision it keeps the route's action, and a
// route's unset action is Reject. Or applies that rule.
//
// OnFull has no UnmarshalText on purpose: decoders read any string into it, so that a
// configuration's validation can report a bad action beside every other problem (check
// it with Valid) instead of the decoder stopping at the first.
type OnFull string

// At-limit actions.
const (
	// Reject answers the message at once with a send-error ack naming the limit.
	Reject OnFull = "reject"
	// Pause stops reading the session's socket until the limit has room (below the low
	// watermark), for at most the route's max_pause; then the message is rejected.
	Pause OnFull = "pause"
)

// ParseOnFull parses "reject" or "pause"; the empty string is the unset OnFull. Anything
// else is an error naming the accepted values.
func ParseOnFull(s string) (OnFull, error) {
	o := OnFull(s)
	if o != "" && !o.Valid() {
		return "", fmt.Errorf("on_full %q: want %s or %s", s, Reject, Pause)
	}
	return o, nil
}

// Valid reports whether o is an action, Reject or Pause. The unset OnFull is not one.
func (o OnFull) Valid() bool { return o == Reject || o == Pause }

// Or returns o, or def when o is unset.
func (o OnFull) Or(def OnFull) OnFull {
	if o == "" {
		return def
	}
	return o
}

// String returns the action's name as written in the configuration, "" when unset.
func (o OnFull) String() string { return string(o) }
