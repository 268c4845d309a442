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
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A client with DisableMetrics registers nothing; without it, its metrics are registered.
func TestDisableMetricsRegistersNothing(t *testing.T) {
	for _, disable := range []bool{true, false} {
		reg := prometheus.NewRegistry()
		c, err := NewClient(ClientOptions{URL: "pulsar://127.0.0.1:6650", DisableMetrics: disable, MetricsRegisterer: reg})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if disable && len(families) != 0 {
			t.Errorf("DisableMetrics: %d metric families registered, want none", len(families))
		}
		if !disable && len(families) == 0 {
			t.Error("without DisableMetrics no metric family registered")
		}
	}
}
