package strategy_test

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
)

func TestOnFull(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		want    strategy.OnFull
		valid   bool
		wantErr bool
	}{
		"reject": {want: strategy.Reject, valid: true},
		"pause":  {want: strategy.Pause, valid: true},
		"":       {want: ""},
		"Pause":  {wantErr: true},
		"drop":   {wantErr: true},
		" pause": {wantErr: true},
	}
	for in, tc := range cases {
		got, err := strategy.ParseOnFull(in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseOnFull(%q) = %q, %v; want %q, error %v", in, got, err, tc.want, tc.wantErr)
		}
		if got.Valid() != tc.valid {
			t.Errorf("OnFull(%q).Valid() = %v, want %v", got, got.Valid(), tc.valid)
		}
		// A decoder takes any string, for validation to judge with Valid.
		var v struct {
			OnFull strategy.OnFull `json:"on_full"`
		}
		b, _ := json.Marshal(map[string]string{"on_full": in})
		if err := json.Unmarshal(b, &v); err != nil || string(v.OnFull) != in {
			t.Errorf("json %s = %q, %v; want %q as is", b, v.OnFull, err, in)
		}
		if v.OnFull.Valid() != tc.valid {
			t.Errorf("decoded %q: Valid() = %v, want %v", v.OnFull, v.OnFull.Valid(), tc.valid)
		}
	}
	if got := strategy.OnFull("").Or(strategy.Pause); got != strategy.Pause {
		t.Errorf("unset.Or(Pause) = %q", got)
	}
	if got := strategy.Reject.Or(strategy.Pause); got != strategy.Reject {
		t.Errorf("Reject.Or(Pause) = %q", got)
	}
	if s := strategy.Pause.String(); s != "pause" {
		t.Errorf("Pause.String() = %q", s)
	}
	b, err := json.Marshal(struct{ O strategy.OnFull }{strategy.Pause})
	if err != nil || string(b) != `{"O":"pause"}` {
		t.Errorf("json.Marshal = %s, %v", b, err)
	}
}
