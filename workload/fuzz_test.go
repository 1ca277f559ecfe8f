package workload

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fuzzseed"
)

// FuzzParseConfig: any input gives a Config or an error, never a panic; an
// accepted input is one valid JSON value (json.Valid: nothing after it); a
// valid Config's sidecar is writable, and the generation_config in it parses
// back to an equal config (the sidecar must stay verifiable). Seeds: the
// serving-inference experiments and testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(validConfig + " xyz")) // junk after the value, once accepted
	f.Add([]byte(validConfig + "]"))
	if fuzzseed.AddFiles(f, filepath.Join(siExperiments, "*.json")) == 0 {
		f.Fatal("no seed files: the fixtures are missing")
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input that is not one JSON value: %q", data)
		}
		meta, err := MarshalMetadata(cfg, "0")
		if err != nil {
			t.Fatalf("valid config, unwritable sidecar: %v", err)
		}
		v, err := decodeJSON(meta)
		if err != nil {
			t.Fatalf("sidecar is not JSON: %v\n%s", err, meta)
		}
		gc := v.(map[string]any)["generation_config"]
		if !pyEqual(gc, any(cfg.GenerationConfig())) {
			t.Fatalf("sidecar generation_config differs from the config:\n%s", meta)
		}
	})
}
