package embedded

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// Faults injects failures into a running broker; get it from Broker.Faults.
// Its methods are safe for concurrent use. The initial state (and the state
// after Reset) injects nothing.
type Faults struct {
	mu             sync.Mutex
	receiptDelay   time.Duration
	holdReceipts   bool
	failCode       pulsarpb.ServerError
	failRemaining  int // >0: that many more; <0: until Reset; 0: off
	stallDispatch  bool
	stallCreation  bool
	onChange       func()           // set once by the broker before use
	dropAll        func()           // set once by the broker before use
	unreachable    func(bool) error // set once by the broker before use
	dispatchResume func()           // set once by the broker before use

	// Lock-free copies for the hot path, written under mu.
	delayNs  atomic.Int64
	holdOn   atomic.Bool
	stallOn  atomic.Bool
	createOn atomic.Bool // stallCreation
	failArms atomic.Bool // failRemaining != 0
}

// publish copies the state the hot path reads. Called with f.mu held.
func (f *Faults) publish() {
	f.delayNs.Store(int64(f.receiptDelay))
	f.holdOn.Store(f.holdReceipts)
	f.stallOn.Store(f.stallDispatch)
	f.createOn.Store(f.stallCreation)
	f.failArms.Store(f.failRemaining != 0)
}

// FaultState is a snapshot of the injected faults, as served by GET /faults.
type FaultState struct {
	// ReceiptDelay is the delay applied to every SEND_RECEIPT.
	ReceiptDelay time.Duration `json:"receipt_delay"`
	// HoldReceipts reports whether receipts are being held.
	HoldReceipts bool `json:"hold_receipts"`
	// FailSendsCode is the error code failing SENDs get ("" if none).
	FailSendsCode string `json:"fail_sends_code,omitempty"`
	// FailSendsRemaining is how many SENDs will still fail (-1: until Reset).
	FailSendsRemaining int `json:"fail_sends_remaining"`
	// StallDispatch reports whether MESSAGE dispatch is stalled.
	StallDispatch bool `json:"stall_dispatch"`
	// StallCreation reports whether PRODUCER and SUBSCRIBE requests go unanswered.
	StallCreation bool `json:"stall_creation"`
}

// State returns a snapshot of the injected faults.
func (f *Faults) State() FaultState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := FaultState{
		ReceiptDelay:       f.receiptDelay,
		HoldReceipts:       f.holdReceipts,
		FailSendsRemaining: f.failRemaining,
		StallDispatch:      f.stallDispatch,
		StallCreation:      f.stallCreation,
	}
	if f.failRemaining != 0 {
		s.FailSendsCode = f.failCode.String()
	}
	return s
}

// DelayReceipts sends each SEND_RECEIPT d after its message was stored,
// keeping every producer's receipts in order. 0 turns the delay off.
func (f *Faults) DelayReceipts(d time.Duration) {
	f.mu.Lock()
	f.receiptDelay = max(d, 0)
	f.publish()
	f.mu.Unlock()
	f.changed()
}

// HoldReceipts queues every SEND_RECEIPT until ReleaseReceipts or Reset.
// Messages are still stored and dispatched; a stored message whose receipt is
// held cannot be evicted, so the held queue is bounded by StoreLimit.
func (f *Faults) HoldReceipts() {
	f.mu.Lock()
	f.holdReceipts = true
	f.publish()
	f.mu.Unlock()
	f.changed()
}

// ReleaseReceipts sends the held receipts (subject to any delay) and stops
// holding new ones.
func (f *Faults) ReleaseReceipts() {
	f.mu.Lock()
	f.holdReceipts = false
	f.publish()
	f.mu.Unlock()
	f.changed()
}

// FailSends makes the next n SENDs fail with SEND_ERROR carrying the named
// ServerError (for example "ServiceNotReady", "TopicTerminatedError"); the
// messages are not stored. n < 0 fails every SEND until Reset; n == 0 turns
// the fault off. Note that pulsar-client-go answers most codes by closing
// the connection and resending.
func (f *Faults) FailSends(code string, n int) error {
	v, ok := pulsarpb.ServerError_value[code]
	if !ok {
		return fmt.Errorf("unknown server error %q", code)
	}
	f.mu.Lock()
	f.failCode = pulsarpb.ServerError(v)
	f.failRemaining = n
	f.publish()
	f.mu.Unlock()
	return nil
}

// DropConnections closes every client connection now. Clients reconnect;
// every message whose receipt was sent stays stored.
func (f *Faults) DropConnections() {
	if f.dropAll != nil {
		f.dropAll()
	}
}

// Unreachable takes the broker off the network (on): its listener closes and every client
// connection is dropped, so that connections are refused until Unreachable(false) listens
// again on the same address. Stored messages stay. This is a broker that went away, where
// DropConnections is one whose connections broke.
func (f *Faults) Unreachable(on bool) error {
	if f.unreachable == nil {
		return ErrClosed
	}
	return f.unreachable(on)
}

// changed tells the broker that receipt faults changed.
func (f *Faults) changed() {
	if f.onChange != nil {
		f.onChange()
	}
}

// StallDispatch stops (on) or resumes (off) sending MESSAGE frames.
func (f *Faults) StallDispatch(on bool) {
	f.mu.Lock()
	f.stallDispatch = on
	f.publish()
	f.mu.Unlock()
	if !on && f.dispatchResume != nil {
		f.dispatchResume()
	}
}

// StallCreation leaves every PRODUCER and SUBSCRIBE request unanswered (on), as a broker
// too busy to create producers and consumers, until StallCreation(false). The client's
// operation timeout ends each such request; one ignored stays ignored when the fault ends.
// Connections, lookups and the data plane carry on.
func (f *Faults) StallCreation(on bool) {
	f.mu.Lock()
	f.stallCreation = on
	f.publish()
	f.mu.Unlock()
}

// Reset turns every fault off and releases held receipts.
func (f *Faults) Reset() {
	f.mu.Lock()
	stalled := f.stallDispatch
	f.receiptDelay, f.holdReceipts, f.failRemaining, f.stallDispatch = 0, false, 0, false
	f.stallCreation = false
	f.publish()
	f.mu.Unlock()
	f.changed()
	if stalled && f.dispatchResume != nil {
		f.dispatchResume()
	}
}

// takeSendFailure reports whether this SEND must fail, and with what code.
func (f *Faults) takeSendFailure() (pulsarpb.ServerError, bool) {
	if !f.failArms.Load() {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.failRemaining == 0:
		return 0, false
	case f.failRemaining > 0:
		f.failRemaining--
		f.publish()
	}
	return f.failCode, true
}

func (f *Faults) receiptPolicy() (time.Duration, bool) {
	return time.Duration(f.delayNs.Load()), f.holdOn.Load()
}

func (f *Faults) stalled() bool { return f.stallOn.Load() }

func (f *Faults) creationStalled() bool { return f.createOn.Load() }
