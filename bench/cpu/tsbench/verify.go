package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// peerLine is a results line other than a case's figure: an engine's
// configuration ({"engine", "config": {...}}) or a correctness check
// against tinyserve ({"engine", "check", "ok", ...}).
type peerLine struct {
	Engine string         `json:"engine"`
	Case   string         `json:"case"`
	Config map[string]any `json:"config"`
	Check  string         `json:"check"`
	OK     *bool          `json:"ok"`
}

// verifyResults checks that every engine in the results file at path ran
// as a user would run it with threads threads, from the configuration
// lines the engines print themselves:
//
//   - pytorch: an optimised BLAS is mapped (OpenBLAS, BLIS or MKL, not
//     Debian's reference libblas3, which is 20-40x slower), torch runs
//     threads threads and so does OpenBLAS;
//   - llama.cpp: its context runs threads threads, on the CPU;
//   - tinyserve engines: threads threads.
//
// Every engine with figures needs a configuration line, and every check
// line must say ok. It writes one line per engine to w and returns an
// error naming every problem.
func verifyResults(w io.Writer, path string, threads int) error {
	configs := map[string][]map[string]any{}
	var engines []string
	var problems []string
	err := eachObject(path, func(line []byte) error {
		var l peerLine
		if err := json.Unmarshal(line, &l); err != nil {
			return err
		}
		if l.Engine == "" {
			return nil
		}
		if !slices.Contains(engines, l.Engine) {
			engines = append(engines, l.Engine)
		}
		switch {
		case l.Config != nil:
			configs[l.Engine] = append(configs[l.Engine], l.Config)
		case l.Check != "" && (l.OK == nil || !*l.OK):
			problems = append(problems, fmt.Sprintf("%s: check %s did not pass", l.Engine, l.Check))
		case l.Check != "":
			fmt.Fprintf(w, "verified: %s: check %s passed\n", l.Engine, l.Check)
		}
		return nil
	})
	if err != nil {
		return err
	}
	seen := map[string]bool{} // each round repeats the configuration lines
	for _, e := range engines {
		cs := configs[e]
		if len(cs) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no configuration line, so its setup is unverified", e))
			continue
		}
		for _, c := range cs {
			desc, bad := verifyConfig(e, c, threads)
			for _, b := range bad {
				problems = append(problems, e+": "+b)
			}
			if line := fmt.Sprintf("verified: %s: %s", e, desc); len(bad) == 0 && !seen[line] {
				seen[line] = true
				fmt.Fprintln(w, line)
			}
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(w, "MISCONFIGURED: %s\n", p)
		}
		return fmt.Errorf("%d problem(s) with the engines' setup", len(problems))
	}
	return nil
}

// verifyConfig checks one engine's configuration line; it returns a short
// description and the problems found.
func verifyConfig(engine string, c map[string]any, threads int) (string, []string) {
	var bad []string
	num := func(key string) (int, bool) {
		v, ok := c[key].(float64)
		return int(v), ok
	}
	wantThreads := func(key, what string) {
		switch n, ok := num(key); {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s (%s) not reported", what, key))
		case n != threads:
			bad = append(bad, fmt.Sprintf("%s is %d, want %d", what, n, threads))
		}
	}
	str := func(key string) string { s, _ := c[key].(string); return s }
	switch {
	case engine == "pytorch":
		switch blas := str("blas"); blas {
		case "openblas", "blis", "mkl":
		case "reference":
			bad = append(bad, "torch runs on the reference BLAS (Debian's libblas3, 20-40x slower): apt-get install libopenblas0-pthread")
		default:
			bad = append(bad, fmt.Sprintf("BLAS %q: not a library a user's torch would use (libraries mapped: %v)", blas, c["blas_libraries"]))
		}
		wantThreads("torch_threads", "torch threads")
		if _, ok := c["openblas_threads"]; ok {
			wantThreads("openblas_threads", "OpenBLAS threads")
		}
		return fmt.Sprintf("torch %s, %v torch threads, BLAS %s (%s, %v threads), sgemm 1024³ %v GFLOP/s",
			str("torch"), c["torch_threads"], str("blas"), str("openblas_config"), c["openblas_threads"], c["sgemm_1024_gflops"]), bad
	case engine == "llama.cpp":
		wantThreads("context_threads", "llama.cpp context threads")
		if gpu, ok := c["gpu"]; !ok || gpu != false {
			bad = append(bad, fmt.Sprintf("llama.cpp's GPU is %v, want false (the CPU build)", gpu))
		}
		return fmt.Sprintf("node-llama-cpp %s (llama.cpp %s, %s), %v context threads, CPU library %v, GGUF file type %v, KV %v",
			str("node_llama_cpp"), str("llama_cpp"), str("build"), c["context_threads"], c["ggml_cpu_libraries"], c["gguf_file_type"], c["kv"]), bad
	case strings.HasPrefix(engine, "tinyserve") || engine == "before":
		wantThreads("threads", "backend threads")
		return fmt.Sprintf("%s, %v threads, weights %s, GODEBUG %q", str("go"), c["threads"], str("weight_dtype"), str("godebug")), bad
	}
	return "not checked (unknown engine)", nil
}
