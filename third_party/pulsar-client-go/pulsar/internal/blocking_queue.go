// Licensed to the Apache Software Foundation (ASF) under one
// or more contributor license agreements.  See the NOTICE file
// distributed with this work for additional information
// regarding copyright ownership.  The ASF licenses this file
// to you under the Apache License, Version 2.0 (the
// "License"); you may not use this file except in compliance
// with the License.  You may obtain a copy of the License at
//
//   http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing,
// software distributed under the License is distributed on an
// "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, either express or implied.  See the License for the
// specific language governing permissions and limitations
// under the License.

package internal

import (
	"sync"
)

// BlockingQueue is a interface of block queue
type BlockingQueue interface {
	// Put enqueue one item, block if the queue is full
	// This is currently used for the internal testing
	Put(item interface{})

	// PutUnsafe enqueue one item without locking the queue, block if the queue is full
	PutUnsafe(item interface{})

	// Take dequeue one item, block until it's available
	Take() interface{}

	// Poll dequeue one item, return nil if queue is empty
	Poll() interface{}

	// CompareAndPoll compare the first item and poll it if meet the conditions
	CompareAndPoll(compare func(item interface{}) bool) interface{}

	// PollIfHead removes item if it is the head of the queue, and reports whether it did.
	PollIfHead(item interface{}) bool

	// Peek return the first item without dequeing, return nil if queue is empty
	Peek() interface{}

	// PeekLast return last item in queue without dequeing, return nil if queue is empty
	PeekLast() interface{}

	// Size return the current size of the queue
	Size() int

	// ReadableSlice returns a new view of the readable items in the queue
	ReadableSlice() []interface{}

	// IterateUnsafe iterates the items in the queue without blocking the queue
	IterateUnsafe(func(item interface{}))

	// Lock locks the queue for manual control
	// Users must call Unlock() after finishing their operations
	Lock()

	// Unlock unlocks the queue
	// Must be called after Lock() to release the lock
	Unlock()
}

type blockingQueue struct {
	// items is a ring that grows, up to maxSize, as the queue fills: a queue that is mostly
	// empty (an idle producer's pending sends) does not hold an array of maxSize.
	items   []interface{}
	headIdx int
	tailIdx int
	size    int
	maxSize int

	mutex      sync.Mutex
	isNotEmpty *sync.Cond
	isNotFull  *sync.Cond
}

func (bq *blockingQueue) IterateUnsafe(f func(item interface{})) {
	readIdx := bq.headIdx
	for i := 0; i < bq.size; i++ {
		f(bq.items[readIdx])
		readIdx++
		if readIdx == len(bq.items) {
			readIdx = 0
		}
	}
}

// NewBlockingQueue init block queue and returns a BlockingQueue
func NewBlockingQueue(maxSize int) BlockingQueue {
	bq := &blockingQueue{
		items:   nil, // grown by PutUnsafe
		headIdx: 0,
		tailIdx: 0,
		size:    0,
		maxSize: maxSize,
	}

	bq.isNotEmpty = sync.NewCond(&bq.mutex)
	bq.isNotFull = sync.NewCond(&bq.mutex)
	return bq
}

func (bq *blockingQueue) Put(item interface{}) {
	bq.Lock()
	defer bq.Unlock()
	bq.PutUnsafe(item)
}

func (bq *blockingQueue) PutUnsafe(item interface{}) {
	for bq.size == bq.maxSize {
		bq.isNotFull.Wait()
	}

	wasEmpty := bq.size == 0

	if bq.size == len(bq.items) {
		bq.grow()
	}
	bq.items[bq.tailIdx] = item
	bq.size++
	bq.tailIdx++
	if bq.tailIdx >= len(bq.items) {
		bq.tailIdx = 0
	}

	if wasEmpty {
		// Wake up eventual reader waiting for next item
		bq.isNotEmpty.Signal()
	}
}

// minQueueItems is the ring's size when the first item is put.
const minQueueItems = 8

// grow doubles the full ring, up to maxSize, with its items in order from its start.
func (bq *blockingQueue) grow() {
	items := make([]interface{}, min(max(2*len(bq.items), minQueueItems), bq.maxSize))
	n := copy(items, bq.items[bq.headIdx:])
	copy(items[n:], bq.items[:bq.headIdx])
	bq.items, bq.headIdx, bq.tailIdx = items, 0, bq.size
}

func (bq *blockingQueue) Take() interface{} {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	for bq.size == 0 {
		bq.isNotEmpty.Wait()
	}

	return bq.dequeue()
}

func (bq *blockingQueue) Poll() interface{} {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	if bq.size == 0 {
		return nil
	}

	return bq.dequeue()
}

func (bq *blockingQueue) CompareAndPoll(compare func(interface{}) bool) interface{} {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	if bq.size == 0 {
		return nil
	}

	if compare(bq.items[bq.headIdx]) {
		return bq.dequeue()
	}
	return nil
}

func (bq *blockingQueue) PollIfHead(item interface{}) bool {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	if bq.size == 0 || bq.items[bq.headIdx] != item {
		return false
	}
	bq.dequeue()
	return true
}

func (bq *blockingQueue) Peek() interface{} {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	if bq.size == 0 {
		return nil
	}
	return bq.items[bq.headIdx]
}

func (bq *blockingQueue) PeekLast() interface{} {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	if bq.size == 0 {
		return nil
	}
	idx := (bq.headIdx + bq.size - 1) % len(bq.items)
	return bq.items[idx]
}

func (bq *blockingQueue) dequeue() interface{} {
	item := bq.items[bq.headIdx]
	bq.items[bq.headIdx] = nil

	bq.headIdx++
	if bq.headIdx == len(bq.items) {
		bq.headIdx = 0
	}

	bq.size--
	bq.isNotFull.Signal()
	return item
}

func (bq *blockingQueue) Size() int {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	return bq.size
}

func (bq *blockingQueue) ReadableSlice() []interface{} {
	bq.mutex.Lock()
	defer bq.mutex.Unlock()

	res := make([]interface{}, bq.size)
	readIdx := bq.headIdx
	for i := 0; i < bq.size; i++ {
		res[i] = bq.items[readIdx]
		readIdx++
		if readIdx == len(bq.items) {
			readIdx = 0
		}
	}

	return res
}

func (bq *blockingQueue) Lock() {
	bq.mutex.Lock()
}

func (bq *blockingQueue) Unlock() {
	bq.mutex.Unlock()
}
