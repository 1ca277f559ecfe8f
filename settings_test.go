package tinyserve

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSettingsNames: the JSON names are those the sweep's target.engine
// has always taken (configs in experiments/ use them), and each setting's
// field and default have a type the flags know.
func TestSettingsNames(t *testing.T) {
	want := []string{"model", "revision", "load_format", "backend", "dtype", "quantization", "tokenizer",
		"tokenizer_revision", "tokenizer_dir", "served_model_name", "chat_template", "max_num_seqs",
		"max_num_batched_tokens", "block_size", "num_blocks", "max_model_len", "max_pending",
		"gpu_memory_utilization", "kv_cache_bytes", "threads", "generation_config", "enable_prefix_caching",
		"enforce_eager", "seed"}
	var got []string
	fields := map[uintptr]string{}
	for _, s := range Settings() {
		got = append(got, s.JSONName())
		var c Config
		p := reflect.ValueOf(s.Field(&c))
		if fields[p.Pointer()] != "" {
			t.Errorf("%s and %s share a field", s.Name, fields[p.Pointer()])
		}
		fields[p.Pointer()] = s.Name
		if s.Default != nil && reflect.TypeOf(s.Default) != p.Type().Elem() {
			t.Errorf("%s: default %T for a %s field", s.Name, s.Default, p.Type().Elem())
		}
		if s.Usage == "" {
			t.Errorf("%s has no usage text", s.Name)
		}
		if _, ok := SettingNamed(s.Name); !ok {
			t.Errorf("SettingNamed(%q) finds nothing", s.Name)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("JSON names %q, want %q", got, want)
	}
}

// TestConfigJSON: an engine settings object round-trips through
// MarshalJSON and DecodeConfigJSON; unknown keys, wrong types and values
// that break a setting's rule are refused, naming the key; a zero value is
// the default, never an error.
func TestConfigJSON(t *testing.T) {
	seed := uint64(0)
	c := Config{Model: "m", Backend: BackendCUDA, MaxNumSeqs: 4, KVCacheBytes: 1 << 40, GPUMemoryUtilization: 0.5,
		EnablePrefixCaching: true, Seed: &seed, Logger: nil}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","backend":"cuda","max_num_seqs":4,"gpu_memory_utilization":0.5,"kv_cache_bytes":1099511627776,"enable_prefix_caching":true,"seed":0}`; string(b) != want {
		t.Errorf("MarshalJSON = %s, want %s", b, want)
	}
	back, err := DecodeConfigJSON(b)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: %+v %v", back, err)
	}
	var viaJSON Config
	if err := json.Unmarshal(b, &viaJSON); err != nil || !reflect.DeepEqual(viaJSON, c) {
		t.Errorf("json.Unmarshal: %+v %v", viaJSON, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"max_num_seqs":-1}`, "engine settings: max_num_seqs must not be negative, got -1"},
		{`{"threads":-1,"max_num_seqs":-2}`, "max_num_seqs must not be negative"},
		{`{"gpu_memory_utilization":1.5}`, "gpu_memory_utilization must be in (0, 1], got 1.5"},
		{`{"max_num_seqs":"4"}`, "max_num_seqs: json: cannot unmarshal string"},
		{`{"seed":-1}`, "seed: json: cannot unmarshal number -1"},
		{`{"model":"m","max-num-seqs":4}`, `unknown field "max-num-seqs"`},
		{`[1]`, "want a JSON object"},
	} {
		if _, err := DecodeConfigJSON([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
	for _, in := range []string{`{}`, `null`, `{"gpu_memory_utilization":0,"max_num_seqs":0,"seed":null}`} {
		if c, err := DecodeConfigJSON([]byte(in)); err != nil || !reflect.DeepEqual(c, Config{}) {
			t.Errorf("%s: %+v %v", in, c, err)
		}
	}
}

// TestRefuseIgnoredFromSettings: each setting a backend would ignore is
// refused on it, named as in the JSON and on the command line, while its
// zero and Neutral values pass.
func TestRefuseIgnoredFromSettings(t *testing.T) {
	for _, s := range Settings() {
		if s.Backends == nil {
			continue
		}
		var other string
		for _, b := range []string{BackendCPU, BackendCUDA, BackendMock} {
			if !slices.Contains(s.Backends, b) {
				other = b
				break
			}
		}
		c := Config{Backend: other}
		switch p := s.Field(&c).(type) {
		case *string:
			*p = "given"
		case *int:
			*p = 3
		case *int64:
			*p = 3
		case *float64:
			*p = 0.5
		}
		err := refuseIgnored(c)
		want := s.JSONName() + " (--" + s.Name + ") "
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "does not apply to the "+other+" backend") {
			t.Errorf("%s on %s: %v, want %q...", s.Name, other, err, want)
		}
		if s.Neutral != "" {
			c := Config{Backend: other}
			*s.Field(&c).(*string) = s.Neutral
			if err := refuseIgnored(c); err != nil {
				t.Errorf("%s %s on %s: %v", s.Name, s.Neutral, other, err)
			}
		}
	}
	if err := refuseIgnored(Config{Backend: BackendMock}); err != nil {
		t.Errorf("nothing given: %v", err)
	}
}
