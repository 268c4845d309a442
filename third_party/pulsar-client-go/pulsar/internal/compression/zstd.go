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

package compression

// NewZStdProvider returns the pure Go zstd provider, in every build: the cgo one (DataDog/zstd)
// allocates the content size a frame's header claims, whatever the message's metadata says,
// and reads a frame that does not fit through a stream it does not bound; and a client whose
// behaviour depends on whether cgo was on is two clients.
func NewZStdProvider(level Level) Provider {
	return newPureGoZStdProvider(level)
}
