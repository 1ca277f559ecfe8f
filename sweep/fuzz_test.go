package sweep

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fuzzseed"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// FuzzParseConfig: any input gives a Config or an error naming ErrConfig,
// never a panic; an accepted config holds every invariant the sweep relies
// on before it sends a request (a path-safe name, a bounded run plan, a
// usable timeout) and its run order can be planned. Seeds: the committed
// experiments and testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	if fuzzseed.AddFiles(f, "../experiments/*.json") == 0 {
		f.Fatal("no seed files: the fixtures are missing")
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig(data)
		if err != nil {
			if !strings.Contains(err.Error(), ErrConfig.Error()) {
				t.Fatalf("error does not say the config is invalid: %v", err)
			}
			return
		}
		if c.Name == "" || strings.ContainsAny(c.Name, `/\`) || filepath.Base(c.Name) != c.Name {
			t.Fatalf("accepted name %q is not one path element", c.Name)
		}
		if c.NumRequests <= 0 || c.Repeats <= 0 || c.Warmups < 0 || len(c.Concurrency) == 0 {
			t.Fatalf("accepted counts: %+v", c)
		}
		if _, err := loadgen.TimeoutDuration(c.Timeout); err != nil {
			t.Fatalf("accepted timeout %v: %v", c.Timeout, err)
		}
		order := Order(c.Seed, c.Concurrency, c.Warmups, c.Repeats)
		if len(order) > maxRuns || len(order) != len(c.Concurrency)*(c.Warmups+c.Repeats) {
			t.Fatalf("%d runs planned for %+v", len(order), c)
		}
		if !c.Embedded() {
			lo := loadgen.LoadOptions{URL: c.URL, Model: c.Model, Concurrency: 1, ExtraBody: c.ExtraBody}
			if err := lo.Validate(); err != nil {
				t.Fatalf("accepted config has unusable load options: %v", err)
			}
		}
	})
}

// FuzzDecodeJSONExact: decodeJSONExact accepts exactly one JSON value with
// nothing after it (json.Valid), out-of-range numbers included, and keeps
// every number as written: the value it gives, written out and decoded
// again, is the same value, and where json.Unmarshal can decode the input
// too each number parses as the float64 it gives.
func FuzzDecodeJSONExact(f *testing.F) {
	for _, s := range []string{`{"seed": 1700000000123456789}`, `[1, 2.50, -0e+3]`, `{"a":1} x`, `1 2`, `"s"`, `{"a":{"b":[null,true]}}`, `{`, ` 7 `, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var exact, plain any
		err := decodeJSONExact(b, &exact)
		if (err == nil) != json.Valid(b) {
			t.Fatalf("decodeJSONExact(%q): %v, but json.Valid says %v", b, err, json.Valid(b))
		}
		if err != nil {
			return
		}
		out, err := json.Marshal(exact)
		if err != nil {
			t.Fatalf("decoded %q cannot be written: %v", b, err)
		}
		var again any
		if err := decodeJSONExact(out, &again); err != nil || !reflect.DeepEqual(again, exact) {
			t.Fatalf("%q decoded as %#v, written as %s, decoded again as %#v (%v)", b, exact, out, again, err)
		}
		if json.Unmarshal(b, &plain) == nil {
			checkNumbers(t, exact, plain)
		}
	})
}

// checkNumbers walks the value decodeJSONExact gave and the one
// json.Unmarshal gave side by side: every number of the first is a
// json.Number that parses as the float64 in the second.
func checkNumbers(t *testing.T, exact, plain any) {
	t.Helper()
	switch e := exact.(type) {
	case json.Number:
		f, err := e.Float64()
		p, ok := plain.(float64)
		if !ok || (err == nil && f != p) || !json.Valid([]byte(e)) {
			t.Fatalf("number %q, json.Unmarshal gives %#v", e, plain)
		}
	case float64:
		t.Fatalf("number decoded as float64 %v, not as written", e)
	case []any:
		p := plain.([]any)
		for i := range e {
			checkNumbers(t, e[i], p[i])
		}
	case map[string]any:
		p := plain.(map[string]any)
		for k := range e {
			checkNumbers(t, e[k], p[k])
		}
	}
}
