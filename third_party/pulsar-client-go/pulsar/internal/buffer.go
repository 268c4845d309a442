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
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
)

type BuffersPool interface {
	GetBuffer(initSize int) Buffer
	Put(buf Buffer)
}

// Buffer is a variable-sized buffer of bytes with Read and Write methods.
// The zero value for Buffer is an empty buffer ready to use.
type Buffer interface {
	ReadableBytes() uint32

	WritableBytes() uint32

	// Capacity returns the capacity of the buffer's underlying byte slice,
	// that is, the total space allocated for the buffer's data.
	Capacity() uint32

	IsWritable() bool

	Read(size uint32) []byte

	Skip(size uint32)

	Get(readerIndex uint32, size uint32) []byte

	ReadableSlice() []byte

	WritableSlice() []byte

	// WrittenBytes advance the writer index when data was written in a slice
	WrittenBytes(size uint32)

	// MoveToFront copy the available portion of data at the beginning of the buffer
	MoveToFront()

	ReadUint16() uint16
	ReadUint32() uint32

	WriteUint16(n uint16)
	WriteUint32(n uint32)

	WriterIndex() uint32
	ReaderIndex() uint32

	Write(s []byte)

	Put(writerIdx uint32, s []byte)
	PutUint32(n uint32, writerIdx uint32)

	Resize(newSize uint32)
	ResizeIfNeeded(spaceNeeded uint32)

	// Retain increases the reference count
	Retain()
	// Release decreases the reference count and returns the buffer to the pool
	// if it's associated with a buffer pool and the count reaches zero.
	Release()
	// RefCnt returns the current reference count of the buffer.
	RefCnt() int64
	// SetReleaseCallback sets a callback function that will be called when the buffer is returned to a pool.
	SetReleaseCallback(cb func())

	// Clear will clear the current buffer data.
	Clear()
}

// bufferPoolImpl keeps the buffers given back by size class, so that a buffer taken for a
// frame is about the frame's size: a single pool of every size lends a batch's buffer of tens
// of kilobytes to a message of one kilobyte sent on its own, which holds it until the broker's
// receipt, and a process with many frames in flight holds several times their bytes.
type bufferPoolImpl struct {
	classes [len(bufferClasses)]sync.Pool
}

// bufferClasses are the sizes of the buffers the pool keeps: the powers of two from 512 bytes
// to 8 MiB and the sizes halfway between them, so that a buffer is at most 1.5 times the size
// asked for. A larger buffer (beyond the broker's largest frame but for a chunk's reassembly)
// is made to size and not kept.
var bufferClasses = func() (sizes [29]int) {
	for c := range sizes {
		sizes[c] = (512 + 256*(c%2)) << (c / 2)
	}
	return sizes
}()

// bufferClass is the smallest class of at least size bytes; len(bufferClasses) when none is.
func bufferClass(size int) int {
	c, _ := slices.BinarySearch(bufferClasses[:], size)
	return c
}

func NewBufferPool() BuffersPool {
	return &bufferPoolImpl{}
}

// GetBuffer gives a buffer of at least initSize bytes: one of its class given back, or a new one
// of the class's size.
func (p *bufferPoolImpl) GetBuffer(initSize int) Buffer {
	var b *buffer
	size := initSize
	if c := bufferClass(initSize); c < len(p.classes) {
		b, _ = p.classes[c].Get().(*buffer)
		size = bufferClasses[c]
	}
	if b != nil {
		b.Clear()
	} else {
		b = &buffer{data: make([]byte, size)}
	}
	b.pool = p
	b.Retain()
	return b
}

// classSize is the size a new buffer of at least size bytes is made: its class's size.
func classSize(size int) int {
	if c := bufferClass(size); c < len(bufferClasses) {
		return bufferClasses[c]
	}
	return size
}

// Put keeps buf in the largest class its capacity holds, which is its own unless it was made
// to a size of none; one smaller than the smallest class or larger than the largest goes.
func (p *bufferPoolImpl) Put(buf Buffer) {
	if b, ok := buf.(*buffer); ok {
		// Get the callback before putting back to the pool because it might be reset after the
		// buffer is returned to the pool and reused in GetBuffer.
		cb := b.releaseCallback
		c, exact := slices.BinarySearch(bufferClasses[:], cap(b.data))
		if !exact {
			c--
		}
		if c >= 0 && cap(b.data) <= bufferClasses[len(bufferClasses)-1] {
			p.classes[c].Put(b)
		}
		if cb != nil {
			cb()
		}
	}
}

type buffer struct {
	data []byte

	readerIdx uint32
	writerIdx uint32

	refCnt atomic.Int64
	pool   BuffersPool

	// releaseCallback is an optional function that is called when the buffer is released back to the pool.
	// It allows custom cleanup or notification logic to be executed after the buffer is returned.
	// The callback is invoked in bufferPoolImpl.Put, after the buffer is put back into the pool.
	releaseCallback func()
}

// NewBuffer creates and initializes a new Buffer using buf as its initial contents.
func NewBuffer(size int) Buffer {
	return &buffer{
		data:      make([]byte, size),
		readerIdx: 0,
		writerIdx: 0,
	}
}

func NewBufferWrapper(buf []byte) Buffer {
	return &buffer{
		data:      buf,
		readerIdx: 0,
		writerIdx: uint32(len(buf)),
	}
}

func (b *buffer) ReadableBytes() uint32 {
	return b.writerIdx - b.readerIdx
}

func (b *buffer) WritableBytes() uint32 {
	return uint32(cap(b.data)) - b.writerIdx
}

func (b *buffer) Capacity() uint32 {
	return uint32(cap(b.data))
}

func (b *buffer) IsWritable() bool {
	return b.WritableBytes() > 0
}

func (b *buffer) Read(size uint32) []byte {
	// Bounded by what is readable, compared so that a size near 2^32 cannot wrap around: the
	// sizes read here come from messages, which any producer of a topic writes. The caller
	// reports a short read (a corrupted message), through its own logger.
	if size > b.ReadableBytes() {
		return nil
	}
	res := b.data[b.readerIdx : b.readerIdx+size]
	b.readerIdx += size
	return res
}

func (b *buffer) Skip(size uint32) {
	b.readerIdx += size
}

func (b *buffer) Get(readerIdx uint32, size uint32) []byte {
	return b.data[readerIdx : readerIdx+size]
}

func (b *buffer) ReadableSlice() []byte {
	return b.data[b.readerIdx:b.writerIdx]
}

func (b *buffer) WritableSlice() []byte {
	return b.data[b.writerIdx:]
}

func (b *buffer) WrittenBytes(size uint32) {
	b.writerIdx += size
}

func (b *buffer) WriterIndex() uint32 {
	return b.writerIdx
}

func (b *buffer) ReaderIndex() uint32 {
	return b.readerIdx
}

func (b *buffer) MoveToFront() {
	size := b.ReadableBytes()
	copy(b.data, b.Read(size))
	b.readerIdx = 0
	b.writerIdx = size
}

func (b *buffer) Resize(newSize uint32) {
	newData := make([]byte, newSize)
	size := b.ReadableBytes()
	copy(newData, b.Read(size))
	b.data = newData
	b.readerIdx = 0
	b.writerIdx = size
}

// ResizeIfNeeded grows the buffer to hold spaceNeeded bytes more than it holds, by half at
// least, to the size of a class of the pool: the buffer goes back to its own class.
func (b *buffer) ResizeIfNeeded(spaceNeeded uint32) {
	if b.WritableBytes() < spaceNeeded {
		capacityNeeded := b.ReadableBytes() + spaceNeeded
		minCapacityIncrease := uint32(cap(b.data) * 3 / 2)
		if capacityNeeded < minCapacityIncrease {
			capacityNeeded = minCapacityIncrease
		}
		b.Resize(uint32(classSize(int(capacityNeeded))))
	}
}

// ReadUint32 reads 4 bytes, or nothing when fewer are readable, and then returns 0.
func (b *buffer) ReadUint32() uint32 {
	if d := b.Read(4); d != nil {
		return binary.BigEndian.Uint32(d)
	}
	return 0
}

// ReadUint16 reads 2 bytes, or nothing when fewer are readable, and then returns 0.
func (b *buffer) ReadUint16() uint16 {
	if d := b.Read(2); d != nil {
		return binary.BigEndian.Uint16(d)
	}
	return 0
}

func (b *buffer) WriteUint32(n uint32) {
	b.ResizeIfNeeded(4)
	binary.BigEndian.PutUint32(b.WritableSlice(), n)
	b.writerIdx += 4
}

func (b *buffer) PutUint32(n uint32, idx uint32) {
	binary.BigEndian.PutUint32(b.data[idx:], n)
}

func (b *buffer) WriteUint16(n uint16) {
	b.ResizeIfNeeded(2)
	binary.BigEndian.PutUint16(b.WritableSlice(), n)
	b.writerIdx += 2
}

func (b *buffer) Write(s []byte) {
	b.ResizeIfNeeded(uint32(len(s)))
	copy(b.WritableSlice(), s)
	b.writerIdx += uint32(len(s))
}

func (b *buffer) Put(writerIdx uint32, s []byte) {
	copy(b.data[writerIdx:], s)
}

func (b *buffer) Retain() {
	b.refCnt.Add(1)
}

func (b *buffer) Release() {
	if b.refCnt.Add(-1) == 0 {
		if b.pool != nil {
			b.pool.Put(b)
		}
	}
}

func (b *buffer) RefCnt() int64 {
	return b.refCnt.Load()
}

func (b *buffer) SetReleaseCallback(cb func()) {
	b.releaseCallback = cb
}

func (b *buffer) Clear() {
	b.readerIdx = 0
	b.writerIdx = 0
	b.refCnt.Store(0)
}
