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
	"reflect"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// Discarded metrics set every metric a producer, consumer, reader or connection uses, for any
// topic, and keep nothing of what they are given.
func TestDiscardedMetricsKeepNothing(t *testing.T) {
	m := NewDiscardedMetrics()
	l := m.GetLeveledMetrics("persistent://public/default/t")
	if l == nil || l != m.GetLeveledMetrics("persistent://tenant/ns/other-partition-1") {
		t.Fatal("topics do not share the one set of discarded metrics")
	}
	for _, v := range []reflect.Value{reflect.ValueOf(m).Elem(), reflect.ValueOf(l).Elem()} {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() && v.Field(i).IsNil() {
				t.Errorf("%s.%s is not set", v.Type().Name(), f.Name)
			}
		}
	}
	l.MessagesPublished.Inc()
	l.BytesPending.Add(1024)
	l.PublishLatency.Observe(0.5)
	m.SendingBuffersCount.Inc()
	m.SendingBufferReleased()
	var out dto.Metric
	if err := l.BytesPending.Write(&out); err != nil {
		t.Fatal(err)
	}
	if g := out.GetGauge().GetValue(); g != 0 {
		t.Errorf("a discarded gauge holds %v, want 0", g)
	}
}
