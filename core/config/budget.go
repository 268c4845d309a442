package config

import (
	"fmt"
	"slices"
	"strings"
)

// The memory budget (memory.limit) and how it is split. The budget is divided in parts: each
// pool and the embedded broker's store take their parts of it unless they are set explicitly,
// and the runtime keeps RuntimeParts, at least MinRuntimeMemory. The parts are today's
// defaults in units of 64 MiB, so the default budget derives the default pools.
const (
	ProducerParts = 1
	ConsumerParts = 1
	SessionParts  = 4
	StoreParts    = 4
	RuntimeParts  = 2
	// BudgetPart is what one part of the default budget is: 12 parts (768MiB) with the
	// embedded broker in the process, 8 (512MiB) without it.
	BudgetPart = 64 * MiB
	// MinRuntimeMemory is the least of the budget left to the runtime beyond the pools and
	// the store: the executable's code and data (about 24MiB resident), goroutine stacks the
	// session costs do not cover, the collector's work space and ImageReserve's margin.
	MinRuntimeMemory = 64 * MiB
	// ImageReserve is what the Go memory limit leaves of the budget for what the process
	// holds outside the Go runtime's accounting: the executable's mapped code and data,
	// which the resident size counts and debug.SetMemoryLimit does not.
	ImageReserve = 32 * MiB
	// MinMemoryLimit is the smallest budget: MinRuntimeMemory plus 1MiB for each part of the
	// pools and the store.
	MinMemoryLimit = MinRuntimeMemory + 32*MiB
	// minPartSize is the least a derived part may be: below it a pool holds no useful message.
	minPartSize = 1 * MiB
)

// Where memory.limit came from (Memory.LimitFrom).
const (
	LimitFromKey     = "memory.limit"
	LimitFromCgroup  = "cgroup"
	LimitFromDefault = "default"
)

// DefaultMemoryBudget is the budget when memory.limit is not set and the process has no cgroup
// memory limit: the sum of the pools' defaults, the store's when the embedded broker runs in
// the process (embedded), and the runtime's share.
func DefaultMemoryBudget(embedded bool) Size {
	parts := int64(ProducerParts + ConsumerParts + SessionParts + RuntimeParts)
	if embedded {
		parts += StoreParts
	}
	return Size(parts) * BudgetPart
}

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
// MinRuntimeMemory). Without a budget (no memory.limit, no cgroup limit) every share not set
// is its parts of BudgetPart and the budget is the sum of the shares plus the runtime's
// RuntimeParts: today's pools' sum, however many are set. It runs once: the keys it derived
// are recorded in Memory.Derived. Explicit shares that leave the runtime too little are left
// to Validate.
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
	if m.Limit != 0 {
		setDefault(&m.LimitFrom, LimitFromKey)
		runtime := max(m.Limit.Bytes()*RuntimeParts/(poolParts+RuntimeParts), MinRuntimeMemory.Bytes())
		unit = (m.Limit.Bytes() - runtime) / poolParts
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
		m.Limit = Size(sum + RuntimeParts*BudgetPart.Bytes())
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
// runtime less than MinRuntimeMemory, naming them. A Config before SetDefaults (no budget
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
	if m.Limit < MinMemoryLimit {
		v.add("memory.limit", "%s%s is below the smallest budget, %s", m.Limit, from, MinMemoryLimit)
		return
	}
	split := c.MemorySplit()
	if split.Runtime >= MinRuntimeMemory {
		return
	}
	var explicit []string
	for _, s := range c.budgetShares() {
		if *s.size != 0 && !slices.Contains(m.Derived, s.key) {
			explicit = append(explicit, fmt.Sprintf("%s %s", s.key, *s.size))
		}
	}
	v.add("memory.limit", "%s%s leaves the runtime %s, less than %s, after %s and the shares derived from it: raise memory.limit, or lower or set those",
		m.Limit, from, split.Runtime, MinRuntimeMemory, strings.Join(explicit, ", "))
}
