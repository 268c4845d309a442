// Package topicname reads the partition a Pulsar topic name designates, as Pulsar's
// TopicName does, so that the edge, its authorization and its embedded broker agree with
// Pulsar on which names are partitions.
package topicname

import (
	"math"
	"strings"
	"unicode"
)

// PartitionSuffix precedes the partition number in a partition's name ("orders-partition-3").
const PartitionSuffix = "-partition-"

// PartitionIndex is the partition topic designates, as TopicName.getPartitionIndex reads it:
// the number after the last PartitionSuffix, read by Java's Integer.parseInt and written as
// Java writes an int (no sign, no leading zero, at most 2^31-1). parseInt takes the decimal
// digits of every script, so "orders-partition-١" is partition 1 to Pulsar (a topic stored
// apart from "orders-partition-1", but a partition of "orders" to its authorization). Any
// other name ("re-partition-events", "orders-partition-01") is an ordinary topic: -1.
func PartitionIndex(topic string) int {
	i := strings.LastIndex(topic, PartitionSuffix)
	if i < 0 {
		return -1
	}
	var n int64
	count := 0
	for _, r := range topic[i+len(PartitionSuffix):] {
		d := javaDigit(r)
		if d < 0 || count > 0 && n == 0 { // not a digit, or after a leading zero
			return -1
		}
		if n = n*10 + int64(d); n > math.MaxInt32 {
			return -1
		}
		count++
	}
	if count == 0 {
		return -1
	}
	return int(n)
}

// javaDigit is the value of r as Java's Character.digit(char, 10) reads one UTF-16 code
// unit: a decimal digit of any script of the Basic Multilingual Plane, else -1 (a digit beyond
// it takes two code units, neither a digit). Unicode encodes each script's digits, zero to
// nine, in a run of their own, and unicode.Nd's ranges are whole runs, so a digit's value is
// its distance from the start of its range, modulo ten.
func javaDigit(r rune) int {
	switch {
	case r >= '0' && r <= '9':
		return int(r - '0')
	case r < 0x80 || r > 0xFFFF:
		return -1
	}
	for _, rg := range unicode.Nd.R16 {
		switch c := uint16(r); {
		case c < rg.Lo:
			return -1
		case c <= rg.Hi:
			return int(c-rg.Lo) % 10
		}
	}
	return -1
}

// Base is the partitioned topic a partition belongs to ("orders" for "orders-partition-3"),
// or topic itself when it designates no partition. Pulsar authorizes a partition as its
// partitioned topic.
func Base(topic string) string {
	if PartitionIndex(topic) < 0 {
		return topic
	}
	return topic[:strings.LastIndex(topic, PartitionSuffix)]
}
