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
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"unicode"
)

// TopicName abstract a struct contained in a Topic
type TopicName struct {
	Domain    string
	Tenant    string
	Namespace string
	Topic     string
	Name      string
	Partition int
}

const (
	publicTenant           = "public"
	defaultNamespace       = "default"
	partitionedTopicSuffix = "-partition-"
)

// ParseTopicName parse the given topic name and return TopicName.
func ParseTopicName(topic string) (*TopicName, error) {
	// The topic name can be in two different forms, one is fully qualified topic name,
	// the other one is short topic name
	if !strings.Contains(topic, "://") {
		// The short topic name can be:
		// - <topic>
		// - <tenant>/<namespace>/<topic>
		// - <tenant>/<cluster>/<namespace>/<topic>
		parts := strings.Split(topic, "/")
		if len(parts) == 3 || len(parts) == 4 {
			topic = "persistent://" + topic
		} else if len(parts) == 1 {
			topic = "persistent://" + publicTenant + "/" + defaultNamespace + "/" + parts[0]
		} else {
			return nil, errors.New(
				"Invalid short topic name '" + topic +
					"', it should be in the format of <tenant>/<namespace>/<topic> or <topic>")
		}
	}

	tn := &TopicName{}

	// The fully qualified topic name can be in two different forms:
	// new:    persistent://tenant/namespace/topic
	// legacy: persistent://tenant/cluster/namespace/topic
	parts := strings.SplitN(topic, "://", 2)
	domain := parts[0]
	if domain != "persistent" && domain != "non-persistent" {
		return nil, errors.New("Invalid topic domain: " + domain)
	}
	tn.Domain = domain

	rest := parts[1]

	// The rest of the name can be in different forms:
	// new:    tenant/namespace/<localName>
	// legacy: tenant/cluster/namespace/<localName>
	// Examples of localName:
	// 1. some/name/xyz//
	// 2. /xyz-123/feeder-2
	parts = strings.SplitN(rest, "/", 4)
	tn.Tenant = parts[0]
	if len(parts) == 3 {
		// New topic name without cluster name
		tn.Namespace = parts[0] + "/" + parts[1]
		tn.Topic = parts[2]
	} else if len(parts) == 4 {
		// Legacy topic name that includes cluster name
		tn.Namespace = fmt.Sprintf("%s/%s/%s", parts[0], parts[1], parts[2])
		tn.Topic = parts[3]
	} else {
		return nil, errors.New("Invalid topic name: " + topic)
	}

	tn.Name = topic
	tn.Partition = getPartitionIndex(topic)

	return tn, nil
}

func TopicNameWithoutPartitionPart(tn *TopicName) string {
	if tn == nil {
		return ""
	}
	if tn.Partition < 0 {
		return tn.Name
	}
	idx := strings.LastIndex(tn.Name, partitionedTopicSuffix)
	if idx > 0 {
		return tn.Name[:idx]
	}
	return tn.Name
}

// getPartitionIndex reads the partition a topic name designates as Pulsar's
// TopicName.getPartitionIndex does: the number after the last "-partition-", as Java's
// Integer.parseInt reads it (the decimal digits of any script of the Basic Multilingual Plane)
// and written as Java writes an int (no sign, no leading zero, at most 2^31-1). Any other name
// is an ordinary topic (-1), as the broker takes it: "re-partition-events",
// "orders-partition-01", "orders-partition-3-sub-DLQ".
func getPartitionIndex(topic string) int {
	i := strings.LastIndex(topic, partitionedTopicSuffix)
	if i < 0 {
		return -1
	}
	var n int64
	count := 0
	for _, r := range topic[i+len(partitionedTopicSuffix):] {
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
// unit, else -1. Unicode encodes each script's digits, zero to nine, in a run of their own,
// and unicode.Nd's ranges are whole runs.
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

func IsV2TopicName(tn *TopicName) bool {
	parts := strings.Split(tn.Namespace, "/")
	// Legacy topic name that includes cluster name
	// tn.Namespace = fmt.Sprintf("%s/%s/%s", parts[0], parts[1], parts[2])
	return len(parts) != 3
}

func GetTopicRestPath(tn *TopicName) string {
	return fmt.Sprintf("%s/%s/%s", tn.Domain, tn.Namespace, url.QueryEscape(tn.Topic))
}
