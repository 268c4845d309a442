package main

import "testing"

func TestTagOf(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.0":        "v1.2.0",
		"bbba03d-dirty": "bbba03d-dirty",
		"v1.2.0+meta/x": "v1.2.0-meta-x",
		"v0.0.0-ci.1_2": "v0.0.0-ci.1_2",
	} {
		if got := tagOf(in); got != want {
			t.Errorf("tagOf(%q) = %q, want %q", in, got, want)
		}
	}
}
