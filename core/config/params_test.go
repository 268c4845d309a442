package config

import (
	"errors"
	"strings"
	"testing"
)

func ptr(n int) *int { return &n }

func TestParamPolicyResolve(t *testing.T) {
	t.Parallel()
	// The two policies from the example configuration.
	pending := ParamPolicy{Default: ptr(1000), Min: ptr(1), Max: ptr(10000), Zero: ParamReject, Negative: ParamReject}
	queue := ParamPolicy{Default: ptr(1000), Min: ptr(1), Max: ptr(1000), Zero: ParamClamp, Negative: ParamReject}
	// Zero values of the actions: reject zero and negatives, clamp the rest.
	bare := ParamPolicy{Default: ptr(10), Min: ptr(5), Max: ptr(20)}
	open := ParamPolicy{Default: ptr(10), Zero: ParamAccept, Negative: ParamAccept}
	strict := ParamPolicy{Default: ptr(10), Min: ptr(5), Max: ptr(20), OutOfRange: ParamReject}

	tests := map[string]struct {
		p       ParamPolicy
		given   *int
		want    int
		wantErr string
	}{
		"omitted gets default":          {p: pending, given: nil, want: 1000},
		"in range as given":             {p: pending, given: ptr(500), want: 500},
		"at max":                        {p: pending, given: ptr(10000), want: 10000},
		"above max clamps":              {p: pending, given: ptr(20000), want: 10000},
		"zero rejected":                 {p: pending, given: ptr(0), wantErr: "client parameter maxPendingMessages=0 is not allowed: must be between 1 and 10000"},
		"negative rejected":             {p: pending, given: ptr(-5), wantErr: "client parameter maxPendingMessages=-5 is not allowed: must be between 1 and 10000"},
		"zero clamps to min":            {p: queue, given: ptr(0), want: 1},
		"receiverQueueSize capped 1000": {p: queue, given: ptr(5000), want: 1000},
		"zero action defaults reject":   {p: bare, given: ptr(0), wantErr: "must be between 5 and 20"},
		"negative defaults reject":      {p: bare, given: ptr(-1), wantErr: "must be between 5 and 20"},
		"below min clamps up":           {p: bare, given: ptr(2), want: 5},
		"accept zero":                   {p: open, given: ptr(0), want: 0},
		"accept negative":               {p: open, given: ptr(-1), want: -1},
		"unbounded positive":            {p: open, given: ptr(1 << 40), want: 1 << 40},
		"out of range rejected":         {p: strict, given: ptr(21), wantErr: "must be between 5 and 20"},
		"below min rejected":            {p: strict, given: ptr(4), wantErr: "must be between 5 and 20"},
		"clamp without min rejects":     {p: ParamPolicy{Default: ptr(1), Zero: ParamClamp}, given: ptr(0), wantErr: "must be positive"},
		"only max in message":           {p: ParamPolicy{Default: ptr(1), Max: ptr(9)}, given: ptr(0), wantErr: "must be between 1 and 9"},
		"only min in message":           {p: ParamPolicy{Default: ptr(1), Min: ptr(3)}, given: ptr(-3), wantErr: "must be at least 3"},
		"no default":                    {p: ParamPolicy{}, given: nil, wantErr: "policy has no default"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.p.Resolve("maxPendingMessages", tt.given)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Resolve = %d, want error %q", got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve error = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestParamErrorIsTyped(t *testing.T) {
	t.Parallel()
	p := ParamPolicy{Default: ptr(1), Min: ptr(1), Max: ptr(10)}
	_, err := p.Resolve("receiverQueueSize", ptr(0))
	var pe *ParamError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *ParamError", err)
	}
	if pe.Param != "receiverQueueSize" || pe.Value != 0 || *pe.Min != 1 || *pe.Max != 10 {
		t.Errorf("ParamError = %+v", pe)
	}
}
