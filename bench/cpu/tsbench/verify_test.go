package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyResults(t *testing.T) {
	good := `{"engine":"tinyserve-bf16","config":{"threads":2,"go":"go1.26","weight_dtype":"bfloat16"}}
{"engine":"tinyserve-bf16","case":"decode-b1","ms":20,"runs":5}
{"engine":"pytorch","config":{"torch":"1.13","torch_threads":2,"blas":"openblas","openblas_threads":2}}
{"engine":"pytorch","case":"decode-b1","ms":60,"runs":5}
{"engine":"pytorch","check":"greedy-16","ok":true}
{"engine":"llama.cpp","config":{"context_threads":2,"gpu":false}}
{"engine":"llama.cpp","case":"decode-b1","ms":30,"runs":5}
`
	for _, tc := range []struct {
		name, extra string
		threads     int
		problems    []string
	}{
		{"good", "", 2, nil},
		{"three threads wanted", "", 3, []string{"torch threads is 2, want 3", "context threads is 2, want 3", "backend threads is 2, want 3"}},
		{"reference BLAS", `{"engine":"pytorch","config":{"torch_threads":2,"blas":"reference"}}`, 2, []string{"reference BLAS"}},
		{"OpenBLAS on one thread", `{"engine":"pytorch","config":{"torch_threads":2,"blas":"openblas","openblas_threads":1}}`, 2, []string{"OpenBLAS threads is 1"}},
		{"failed check", `{"engine":"llama.cpp","check":"greedy-16","ok":false}`, 2, []string{"check greedy-16 did not pass"}},
		{"unverified engine", `{"engine":"other","case":"decode-b1","ms":1,"runs":1}`, 2, []string{"other: no configuration line"}},
		{"GPU", `{"engine":"llama.cpp","config":{"context_threads":2,"gpu":"cuda"}}`, 2, []string{"GPU is cuda"}},
	} {
		path := filepath.Join(t.TempDir(), "results.jsonl")
		if err := os.WriteFile(path, []byte(good+tc.extra+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		err := verifyResults(&out, path, tc.threads)
		if (err != nil) != (len(tc.problems) > 0) {
			t.Errorf("%s: error %v, want problems %v\n%s", tc.name, err, tc.problems, out.String())
		}
		for _, p := range tc.problems {
			if !strings.Contains(out.String(), p) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, p, out.String())
			}
		}
	}
}
