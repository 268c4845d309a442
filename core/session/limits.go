package session

import (
	"fmt"

	"github.com/sluicehq/sluice/core/wsapi"
)

// FrameLimits bounds what one producer frame may contain, so that what a frame makes the edge
// hold (and spend decoding) is bounded whatever the client sends. Pulsar has no such bounds.
// Zero fields are unbounded.
type FrameLimits struct {
	// MaxContextBytes bounds the context, which is held until the ack is written and echoed in
	// it (websocket.max_context_size).
	MaxContextBytes int
	// MaxProperties bounds the number of properties (websocket.max_properties).
	MaxProperties int
	// MaxPropertyBytes bounds the properties' keys and values together
	// (websocket.max_properties_size).
	MaxPropertyBytes int
}

// check reports the first bound m exceeds, as the code-7 error ack it is answered with. The
// context is echoed unless it is what exceeds its bound.
func (l FrameLimits) check(m *wsapi.ProducerMessage) *wsapi.FrameError {
	if l.MaxContextBytes > 0 && m.Context != nil && len(*m.Context) > l.MaxContextBytes {
		return &wsapi.FrameError{Code: wsapi.ErrorPayloadEncoding, Msg: fmt.Sprintf(
			"context of %d bytes exceeds this edge's bound of %d bytes (websocket.max_context_size)", len(*m.Context), l.MaxContextBytes)}
	}
	if l.MaxProperties > 0 && len(m.Properties) > l.MaxProperties {
		return &wsapi.FrameError{Code: wsapi.ErrorPayloadEncoding, Context: m.Context, Msg: fmt.Sprintf(
			"%d properties exceed this edge's bound of %d properties (websocket.max_properties)", len(m.Properties), l.MaxProperties)}
	}
	if l.MaxPropertyBytes > 0 {
		n := 0
		for k, v := range m.Properties {
			n += len(k) + len(v)
		}
		if n > l.MaxPropertyBytes {
			return &wsapi.FrameError{Code: wsapi.ErrorPayloadEncoding, Context: m.Context, Msg: fmt.Sprintf(
				"properties of %d bytes exceed this edge's bound of %d bytes (websocket.max_properties_size)", n, l.MaxPropertyBytes)}
		}
	}
	return nil
}
