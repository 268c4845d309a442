package strategytest

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// TestProbeFields: every field of the request types changes the probe's rendering, so a
// field added to the contract without being added to the probe fails here.
func TestProbeFields(t *testing.T) {
	t.Parallel()
	checkRendersEveryField(t, strategy.ProducerRequest{}, func(v any) string { return producerFields(v.(strategy.ProducerRequest)) })
	checkRendersEveryField(t, strategy.ConsumerRequest{}, func(v any) string { return consumerFields(v.(strategy.ConsumerRequest)) })
}

func checkRendersEveryField(t *testing.T, zero any, render func(any) string) {
	t.Helper()
	typ := reflect.TypeOf(zero)
	base := render(zero)
	for i := range typ.NumField() {
		f := typ.Field(i)
		v := reflect.New(typ).Elem()
		switch fv := v.Field(i); f.Type.Kind() {
		case reflect.String:
			fv.SetString("x")
		case reflect.Bool:
			fv.SetBool(true)
		case reflect.Struct: // ClientValue: both of its fields
			for _, cv := range []strategy.ClientValue{{Value: 1}, {Requested: intp(0)}} {
				fv.Set(reflect.ValueOf(cv))
				if render(v.Interface()) == base {
					t.Errorf("%s.%s = %+v does not change the probe's rendering", typ.Name(), f.Name, cv)
				}
			}
			continue
		default:
			t.Fatalf("%s.%s: unhandled kind %s", typ.Name(), f.Name, f.Type.Kind())
		}
		if render(v.Interface()) == base {
			t.Errorf("%s.%s does not change the probe's rendering", typ.Name(), f.Name)
		}
	}
}
