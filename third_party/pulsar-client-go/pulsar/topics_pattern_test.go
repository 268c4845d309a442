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

package pulsar

import (
	"slices"
	"testing"
)

// A topics pattern matches the whole of a topic's name without its domain, as in Pulsar's
// Java client: not a part of it, and not the short name of a pattern without its namespace.
func TestTopicsPatternMatchesAsJava(t *testing.T) {
	topics := []string{
		"persistent://public/default/t-1",
		"persistent://public/default/t-10",
		"persistent://public/default/t-1-partition-0",
		"persistent://public/default/t-1-partition-1",
		"persistent://public/default/x-t-1",
	}
	for pattern, want := range map[string][]string{
		"public/default/t-[0-2]":              {"persistent://public/default/t-1"},
		"persistent://public/default/t-1.*":   {"persistent://public/default/t-1", "persistent://public/default/t-10"},
		"public/default/.*t-1":                {"persistent://public/default/t-1", "persistent://public/default/x-t-1"},
		"t-.*":                                nil,
		"persistent://public/default/(t|x).*": {"persistent://public/default/t-1", "persistent://public/default/t-10", "persistent://public/default/x-t-1"},
	} {
		re, err := extractTopicPattern(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := filterTopics(topics, re); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("%s matches %v, want %v", pattern, got, want)
		}
	}
}
