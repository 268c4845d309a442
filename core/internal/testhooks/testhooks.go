// Package testhooks holds the hooks through which tests make a dependency of the edge misbehave
// in a way no fake can: the client library, here. Each hook is nil outside tests, where it
// costs an atomic load.
package testhooks

import "sync/atomic"

// DropSendCallback is asked, when set, about each send callback of the Pulsar client library,
// with the topic of the producer: when it returns true, core/broker drops the callback, as if
// the library had never called it. Tests use it to show that the edge answers every message
// and releases every charge without the library's callbacks.
var DropSendCallback atomic.Pointer[func(topic string) bool]
