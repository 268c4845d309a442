package config

import (
	"fmt"
	"slices"
	"strings"
)

// The memory budget (memory.limit) and how it is split. The budget is divided in parts: the
// runtime keeps RuntimeParts, at least RuntimeFloor, and each pool and the embedded broker's
// store take their parts of the rest unless they are set explicitly. The parts are the
// defaults in units of BudgetPart, so that the default budget derives the default pools.
const (
	ProducerParts = 1
	ConsumerParts = 1
	SessionParts  = 4
	StoreParts    = 4
	RuntimeParts  = 2
	// BudgetPart is what one part of the default budget is: 12 parts (768MiB) with the
	// embedded broker in the process, 8 (512MiB) without it.
	BudgetPart = 64 * MiB
	// MinRuntimeMemory is the least of the budget left to the runtime beyond the pools, the
	// store and what the pools may hold past their limits (SoftOvershoot): the executable's
	// code and data (about 24MiB resident), goroutine stacks the session costs do not cover,
	// and the collector's room to work under the Go memory limit.
	MinRuntimeMemory = 64 * MiB
	// ImageReserve is what the Go memory limit leaves of the budget for what the process
	// holds outside the Go runtime's accounting: the executable's mapped code and data,
	// which the resident size counts and debug.SetMemoryLimit does not.
	ImageReserve = 32 * MiB
	// minPartSize is the least a derived part may be: below it a pool holds no useful message.
	minPartSize = 1 * MiB
)

// SoftOvershoot is what the producer and consumer pools may hold past their limits, which are
// soft by one message: a producer message of maxMessage bytes is charged 3 times its payload,
// a consumer message 7/3 times (core/session's ProducerPayloadFactor and
// ConsumerPayloadFactor), 16/3 times in all: 26.7MiB with the default 5MiB.
func SoftOvershoot(maxMessage Size) Size { return maxMessage * 16 / 3 }

// RuntimeFloor is the least of c's budget the runtime keeps: MinRuntimeMemory and the pools'
// SoftOvershoot, rounded up to a MiB (91MiB with the default max_message_size).
func (c *Config) RuntimeFloor() Size {
	return MinRuntimeMemory + roundUp(SoftOvershoot(c.WebSocket.MaxMessageSize), MiB)
}

func roundUp(s, unit Size) Size { return (s + unit - 1) / unit * unit }

// MinMemoryLimit is the smallest budget for c: its RuntimeFloor and 32MiB for the pools and
// the store (123MiB with the default max_message_size).
func (c *Config) MinMemoryLimit() Size { return c.RuntimeFloor() + 32*MiB }

// Where memory.limit came from (Memory.LimitFrom).
const (
	LimitFromKey     = "memory.limit"
	LimitFromCgroup  = "cgroup"
	LimitFromDefault = "default"
)

// budgetShare is one of the parts of the budget other than the runtime's: a pool or the store.
type budgetShare struct {
	key   string
	size  *Size
	set   bool // given explicitly (a zero pool is then unbounded)
	parts int64
}

// budgetShares are the shares of c's budget: the three pools, and the store when `sluice
// serve` runs the embedded broker in its process (broker.url is empty).
func (c *Config) budgetShares() []budgetShare {
	m := &c.Memory
	s := []budgetShare{
		{"memory.producer_limit", &m.ProducerLimit, m.ProducerLimitSet, ProducerParts},
		{"memory.consumer_limit", &m.ConsumerLimit, m.ConsumerLimitSet, ConsumerParts},
		{"memory.session_limit", &m.SessionLimit, m.SessionLimitSet, SessionParts},
	}
	if c.Broker.URL == "" {
		s = append(s, budgetShare{"broker.embedded.store_limit", &c.Broker.Embedded.StoreLimit, false, StoreParts})
	}
	return s
}

// splitBudget resolves memory.limit and gives every share that was not set explicitly its
// fixed part of the budget less the runtime's share (RuntimeParts of it, at least
// RuntimeFloor). Without a budget (no memory.limit, no cgroup limit) every share not set is
// its parts of BudgetPart, and the budget is the sum of the shares plus RuntimeParts of
// BudgetPart (at least RuntimeFloor), however many are set. It runs once: the keys it
// derived are recorded in Memory.Derived. Explicit shares that leave the runtime too little
// are left to Validate.
func (c *Config) splitBudget() {
	m := &c.Memory
	if m.Derived != nil {
		return
	}
	shares := c.budgetShares()
	poolParts := int64(0)
	for _, s := range shares {
		poolParts += s.parts
	}
	unit := BudgetPart.Bytes()
	runtime := max(RuntimeParts*BudgetPart.Bytes(), c.RuntimeFloor().Bytes())
	if m.Limit != 0 {
		setDefault(&m.LimitFrom, LimitFromKey)
		runtime = max(m.Limit.Bytes()*RuntimeParts/(poolParts+RuntimeParts), c.RuntimeFloor().Bytes())
		// A whole number of MiB a part, so that the shares read as the budget does; what
		// the rounding leaves is the runtime's.
		unit = (m.Limit.Bytes() - runtime) / poolParts / MiB.Bytes() * MiB.Bytes()
		if unit < minPartSize.Bytes() {
			return // below MinMemoryLimit, which Validate reports
		}
	}
	var sum int64
	for _, s := range shares {
		if !s.set && *s.size == 0 {
			*s.size = Size(s.parts * unit)
			m.Derived = append(m.Derived, s.key)
		}
		sum += s.size.Bytes()
	}
	if m.Limit == 0 {
		m.Limit = Size(sum + runtime)
		m.LimitFrom = LimitFromDefault
	}
}

// MemorySplit is how the budget is divided, for `sluice validate` and the startup log.
type MemorySplit struct {
	Limit Size   // memory.limit
	From  string // LimitFromKey, LimitFromCgroup or LimitFromDefault
	// Producer, Consumer, Session and Store are the pools and the embedded broker's store
	// (zero when it does not run in the process); zero pools are unbounded.
	Producer, Consumer, Session, Store Size
	// Runtime is what the budget leaves beyond them.
	Runtime Size
	// GoLimit is the Go memory limit `sluice serve` sets: the budget less ImageReserve, or
	// zero (none) when a pool is unbounded and the budget therefore not kept.
	GoLimit Size
	// Derived are the keys taken from the budget rather than set.
	Derived []string
}

// MemorySplit returns how c's budget is divided; call it after SetDefaults.
func (c *Config) MemorySplit() MemorySplit {
	m := c.Memory
	s := MemorySplit{Limit: m.Limit, From: m.LimitFrom, Producer: m.ProducerLimit, Consumer: m.ConsumerLimit,
		Session: m.SessionLimit, Derived: m.Derived}
	if c.Broker.URL == "" {
		s.Store = c.Broker.Embedded.StoreLimit
	}
	if s.Producer != 0 && s.Consumer != 0 && s.Session != 0 {
		s.GoLimit = max(m.Limit-ImageReserve, 0)
	}
	s.Runtime = m.Limit - s.Producer - s.Consumer - s.Session - s.Store
	return s
}

// String is the split on one line: "768MiB (default): producer_limit 64MiB, ...".
func (s MemorySplit) String() string {
	from := s.From
	if from == LimitFromKey {
		from = "set"
	}
	parts := []string{
		"producer_limit " + s.poolString(s.Producer, "memory.producer_limit"),
		"consumer_limit " + s.poolString(s.Consumer, "memory.consumer_limit"),
		"session_limit " + s.poolString(s.Session, "memory.session_limit"),
	}
	if s.Store > 0 {
		parts = append(parts, "store_limit "+s.poolString(s.Store, "broker.embedded.store_limit"))
	}
	parts = append(parts, "runtime "+s.Runtime.String())
	return fmt.Sprintf("%s (%s): %s", s.Limit, from, strings.Join(parts, ", "))
}

func (s MemorySplit) poolString(v Size, key string) string {
	switch {
	case v == 0:
		return "unbounded"
	case !slices.Contains(s.Derived, key):
		return v.String() + " (set)"
	}
	return v.String()
}

// validateBudget refuses a budget below MinMemoryLimit, and explicit shares that leave the
// runtime less than RuntimeFloor, naming them. A Config before SetDefaults (no budget
// yet) is not checked.
func (c *Config) validateBudget(v *validator) {
	m := c.Memory
	if m.Limit == 0 {
		return
	}
	from := ""
	if m.LimitFrom == LimitFromCgroup {
		from = " (the cgroup's memory limit)"
	}
	if least := c.MinMemoryLimit(); m.Limit < least {
		v.add("memory.limit", "%s%s is below the smallest budget, %s with websocket.max_message_size %s", m.Limit, from, least, c.WebSocket.MaxMessageSize)
		return
	}
	split := c.MemorySplit()
	floor := c.RuntimeFloor()
	if split.Runtime >= floor {
		return
	}
	var explicit []string
	for _, s := range c.budgetShares() {
		if *s.size != 0 && !slices.Contains(m.Derived, s.key) {
			explicit = append(explicit, fmt.Sprintf("%s %s", s.key, *s.size))
		}
	}
	v.add("memory.limit", "%s%s leaves the runtime %s, less than %s, after %s and the shares derived from it: raise memory.limit, or lower or set those",
		m.Limit, from, split.Runtime, floor, strings.Join(explicit, ", "))
}
