// Package topicname reads the partition a Pulsar topic name designates, as Pulsar's
// TopicName does, so that the edge, its authorization and its embedded broker agree with
// Pulsar on which names are partitions.
package topicname

import (
	"strconv"
	"strings"
)

// PartitionSuffix precedes the partition number in a partition's name ("orders-partition-3").
const PartitionSuffix = "-partition-"

// PartitionIndex is the partition topic designates, as TopicName.getPartitionIndex reads it:
// the number after the last PartitionSuffix, written as Java writes an int (no sign, no
// leading zero, at most 2^31-1). Any other name ("re-partition-events",
// "orders-partition-01") is an ordinary topic: -1.
func PartitionIndex(topic string) int {
	i := strings.LastIndex(topic, PartitionSuffix)
	if i < 0 {
		return -1
	}
	digits := topic[i+len(PartitionSuffix):]
	n, err := strconv.ParseUint(digits, 10, 31) // no sign, at most 2^31-1
	if err != nil || len(digits) > 1 && digits[0] == '0' {
		return -1
	}
	return int(n)
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
