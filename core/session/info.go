package session

import (
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
)

// Info describes one open session, for the admin endpoints (/sessions and Pulsar's
// proxy-stats).
type Info struct {
	ID    uint64     `json:"id"`
	Kind  wsapi.Kind `json:"-"`
	Topic string     `json:"topic"`
	// Namespace is the topic's namespace ("tenant/ns"); empty for v3 multi-topic sessions.
	Namespace        string    `json:"namespace,omitempty"`
	Subscription     string    `json:"subscription,omitempty"`
	SubscriptionType string    `json:"subscription_type,omitempty"`
	SubscriptionMode string    `json:"subscription_mode,omitempty"`
	Route            string    `json:"route"`
	Role             string    `json:"role,omitempty"`
	RemoteAddr       string    `json:"remote_addr"`
	Opened           time.Time `json:"opened"`
	// MessagesIn and BytesIn count what the client sent: a producer's message frames (with
	// their bytes); a consumer's acks and negative acks (bytes not measured).
	MessagesIn int64 `json:"messages_in"`
	BytesIn    int64 `json:"bytes_in"`
	// MessagesOut and BytesOut count what the edge sent: a consumer's or reader's message
	// frames (with their bytes); a producer's acks (bytes not measured).
	MessagesOut int64 `json:"messages_out"`
	BytesOut    int64 `json:"bytes_out"`
	// Failed counts a producer's messages answered with an error ack (rejected, invalid or
	// failed by the broker).
	Failed int64 `json:"failed,omitempty"`
	// InFlight is a producer's messages read and not yet acknowledged, or a consumer's
	// messages delivered and not yet acknowledged.
	InFlight int64 `json:"in_flight"`
	// HeldBytes is what the session's gate holds now: a producer's messages in flight and
	// acks to write, a consumer's messages taken from the broker and not yet written.
	HeldBytes int64 `json:"held_bytes"`
	// PausedOn is what a producer session whose reader is paused, not reading its socket,
	// waits for (PauseCause: limit, message_rate, unread_acks), and PausedSince since when;
	// empty and zero while it reads.
	PausedOn    string    `json:"paused_on,omitempty"`
	PausedSince time.Time `json:"paused_since,omitzero"`
}
