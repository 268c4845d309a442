package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// SharedQueue is the client library's queue of a shared producer, in messages. The producers
// sharing it hold parts of it that add up to at most this, so that the library never refuses
// a send one of them hands it; one that finds no library producer with room for its part
// starts another.
const SharedQueue = 1024

// sharing holds a client's shared library producers by the options their sharers have in
// common: theirs with MaxPendingMessages, each one's part of the queue, zero.
type sharing struct {
	mu   sync.Mutex
	sets map[ProducerOptions]*sharedSet
}

// sharedSet is the library producers of one key.
type sharedSet struct {
	shares []*share
	// creating is closed when the creation of a library producer for the key ends; nil when
	// none runs. Producers arriving meanwhile wait for it rather than create their own.
	creating chan struct{}
}

// share is one shared library producer and what its sharers hold of it.
type share struct {
	s   *sharing
	key ProducerOptions
	lib *Producer // the library producer; its own accounting is unused
	// parts is the queue its sharers hold, closed or not, until the library has called back
	// their sends; open is how many are not closed.
	parts, open int
	// libClosed is closed once the last sharer has closed the library producer: every send it
	// held has been called back, or never will be.
	libClosed chan struct{}
}

// joinShared returns a producer that shares a library producer of o's options with others
// on the topic, creating that library producer if none has room for o's part of the queue.
func (c *Client) joinShared(ctx context.Context, o ProducerOptions) (*Producer, error) {
	if o.Name != "" || o.InitialSequenceID != nil {
		return nil, fmt.Errorf("creating producer on %s: %w: a named producer, or one with an initial sequence id, cannot be shared", o.Topic, ErrInvalidArgument)
	}
	part := o.MaxPendingMessages
	if part < 1 || part > SharedQueue {
		return nil, fmt.Errorf("creating producer on %s: %w: a shared producer's max pending messages must be 1 to %d", o.Topic, ErrInvalidArgument, SharedQueue)
	}
	key := o
	key.MaxPendingMessages = 0
	s := &c.shared
	for {
		s.mu.Lock()
		if s.sets == nil {
			s.sets = make(map[ProducerOptions]*sharedSet)
		}
		// One the library closed while idle is retired here; one it closed under a send, when
		// the send comes back. (Retiring the last may take the set out of the map.)
		if set := s.sets[key]; set != nil {
			for _, sh := range slices.Clone(set.shares) {
				if libraryClosed(sh.lib.p) {
					sh.retireLocked()
				}
			}
		}
		set := s.sets[key]
		if set == nil {
			set = &sharedSet{}
			s.sets[key] = set
		}
		for _, sh := range set.shares {
			if sh.parts+part <= SharedQueue {
				sh.parts += part
				sh.open++
				s.mu.Unlock()
				return sh.sharer(part), nil
			}
		}
		if wait := set.creating; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("creating producer on %s: %w", o.Topic, ended(ctx))
			}
		}
		created := make(chan struct{})
		set.creating = created
		s.mu.Unlock()

		lo := o
		lo.MaxPendingMessages = SharedQueue
		lib, err := c.createLibProducer(ctx, lo)

		s.mu.Lock()
		set.creating = nil
		close(created)
		if err != nil {
			if len(set.shares) == 0 {
				delete(s.sets, key)
			}
			s.mu.Unlock()
			return nil, err
		}
		sh := &share{s: s, key: key, lib: lib, parts: part, open: 1, libClosed: make(chan struct{})}
		set.shares = append(set.shares, sh)
		s.mu.Unlock()
		return sh.sharer(part), nil
	}
}

// sharer is a new producer on sh holding part of its queue.
func (sh *share) sharer(part int) *Producer {
	return &Producer{p: sh.lib.p, topic: sh.lib.topic, name: sh.lib.name, partitioned: sh.lib.partitioned, share: sh, part: part}
}

// close is one sharer closing: the last one open takes the library producer out of the set
// and closes it, which answers every send it still holds. One that closes with sends the
// broker has not answered takes it out of the set too, and no producer joins it again: the
// broker is slow or stuck on it, and new sessions are better served by a producer of their
// own than queued behind it.
func (sh *share) close(unanswered bool) {
	s := sh.s
	s.mu.Lock()
	sh.open--
	last := sh.open == 0
	if last || unanswered {
		sh.retireLocked()
	}
	s.mu.Unlock()
	if last {
		sh.lib.p.Close()
		close(sh.libClosed)
	}
}

// retire takes the library producer out of the set, so that no producer joins it again: the
// library closed it (a terminated or deleted topic, a fenced producer), and a new producer on
// the topic is to be refused by the broker as it would be unshared, not handed a closed one.
func (sh *share) retire() {
	sh.s.mu.Lock()
	sh.retireLocked()
	sh.s.mu.Unlock()
}

func (sh *share) retireLocked() {
	set := sh.s.sets[sh.key]
	if set == nil {
		return
	}
	set.shares = slices.DeleteFunc(set.shares, func(x *share) bool { return x == sh })
	if len(set.shares) == 0 && set.creating == nil {
		delete(sh.s.sets, sh.key)
	}
}

// libraryClosed reports whether p, a library producer, has closed: a sharer joining it would
// be answered only with errors.
func libraryClosed(p pulsar.Producer) bool {
	c, ok := p.(interface{ Closed() bool })
	return ok && c.Closed()
}

// closedByLibrary reports whether a send's error says the library has closed its producer.
func closedByLibrary(err error) bool {
	for _, e := range []error{pulsar.ErrProducerClosed, pulsar.ErrTopicTerminated, pulsar.ErrTopicNotfound, pulsar.ErrProducerFenced} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// giveBack returns a closed sharer's part of the queue, once the library holds none of its
// sends.
func (sh *share) giveBack(part int) {
	sh.s.mu.Lock()
	sh.parts -= part
	sh.s.mu.Unlock()
}
