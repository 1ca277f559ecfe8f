package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestGenerateBuiltinModel(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"generate", "--prompt", "Hello there", "--prompt", "A second prompt", "--max-tokens", "5", "--ignore-eos"}
	if err := newApp(&out, &errs).Run(args); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	got := out.String()
	for _, want := range []string{"model tiny-gpt2 on cpu (random weights", "--- prompt 0 (5 tokens, finish length)\nHello there", "--- prompt 1 (5 tokens, finish length)\nA second prompt"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestGeneratePromptWithCommas: a prompt with commas (the README's "Hello,
// my name is") stays one prompt.
func TestGeneratePromptWithCommas(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"generate", "--prompt", "Hello, my name is", "--max-tokens", "2", "--ignore-eos"}
	if err := newApp(&out, &errs).Run(args); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	got := out.String()
	if !strings.Contains(got, "--- prompt 0 (2 tokens, finish length)\nHello, my name is") || strings.Contains(got, "--- prompt 1") {
		t.Errorf("want one prompt, the whole text:\n%s", got)
	}
	// Leading spaces are part of a prompt (GPT-2 encodes " Hello" and
	// "Hello" differently); the flag library trimmed them.
	out.Reset()
	args = []string{"generate", "--prompt", "  two spaces", "--max-tokens", "1", "--ignore-eos"}
	if err := newApp(&out, &errs).Run(args); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if !strings.Contains(out.String(), "finish length)\n  two spaces") {
		t.Errorf("leading spaces lost:\n%s", out.String())
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, args := range [][]string{
		{"generate", "--backend", "tpu"},
		{"generate", "--model", "/nonexistent/checkpoint"},
		{"generate", "--dtype", "int4"},
		{"generate", "--max-tokens", "0"},
		{"generate", "--presence-penalty", "2.5"},
		{"generate", "--repetition-penalty", "0"},
		// The mock backend refuses options it would ignore.
		{"generate", "--backend", "mock", "--tokenizer", "/nonexistent", "-p", "hi", "--max-tokens", "1"},
		{"generate", "--backend", "mock", "--tokenizer", "gpt2", "--score", "-p", "hi there"},
		{"generate", "--backend", "mock", "--model", "tiny-gpt2", "-p", "hi", "--max-tokens", "1"},
		{"generate", "--backend", "mock", "--dtype", "float32", "-p", "hi", "--max-tokens", "1"},
	} {
		var out, errs bytes.Buffer
		if err := newApp(&out, &errs).Run(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestScore: --score prints one line per prompt token, the first unscored,
// and a perplexity that is exp of minus the mean of the printed values.
func TestScore(t *testing.T) {
	var out, errs bytes.Buffer
	// The prompt fills the context (5 tokens): scoring generates nothing,
	// so it fits, and the sampling flags (--max-tokens 0) do not apply.
	args := []string{"generate", "--score", "--max-model-len", "5", "--max-tokens", "0", "--prompt", "Hello, my name is", "--prompt", "x"}
	if err := newApp(&out, &errs).Run(args); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	got := out.String()
	sections := strings.Split(got, "\n--- prompt ")
	if len(sections) != 3 {
		t.Fatalf("want two prompt sections:\n%s", got)
	}
	var n, scored int
	var ll float64
	var ppl string
	if _, err := fmt.Sscanf(sections[1], "0: %d tokens, %d scored, log-likelihood %g, perplexity %s", &n, &scored, &ll, &ppl); err != nil {
		t.Fatalf("header: %v\n%s", err, sections[1])
	}
	lines := strings.Split(strings.TrimSpace(sections[1]), "\n")[2:] // after the header and the column names
	if n != 5 || scored != 4 || len(lines) != n {
		t.Fatalf("%d tokens, %d scored, %d lines:\n%s", n, scored, len(lines), sections[1])
	}
	sum := 0.0
	row := regexp.MustCompile(`^\s*\d+\s+"(?:[^"\\]|\\.)*"\s+(\S+)`)
	for _, l := range lines[1:] {
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q", l)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || v > 0 {
			t.Fatalf("line %q: logprob %v (%v)", l, v, err)
		}
		sum += v
	}
	if math.Abs(sum-ll) > 1e-3 {
		t.Errorf("lines sum to %.4f, header says %.4f", sum, ll)
	}
	p, _ := strconv.ParseFloat(ppl, 64)
	if want := math.Exp(-ll / 4); math.Abs(p-want)/want > 1e-3 {
		t.Errorf("perplexity %s, want %.4g", ppl, want)
	}
	if !strings.HasPrefix(sections[2], "1: 1 tokens, 0 scored, log-likelihood 0.0000, perplexity -") {
		t.Errorf("one-token prompt:\n%s", sections[2])
	}
}

// TestGeneratePenalties: a frequency penalty changes a greedy completion
// that repeats tokens (the built-in random model does).
func TestGeneratePenalties(t *testing.T) {
	outputs := map[string]string{}
	for _, extra := range [][]string{nil, {"--frequency-penalty", "2"}} {
		var out, errs bytes.Buffer
		args := append([]string{"generate", "--prompt", "Hello", "--max-tokens", "12", "--ignore-eos"}, extra...)
		if err := newApp(&out, &errs).Run(args); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, errs.String())
		}
		outputs[fmt.Sprint(extra)] = out.String()
	}
	if outputs["[]"] == outputs["[--frequency-penalty 2]"] {
		t.Errorf("--frequency-penalty 2 changed nothing:\n%s", outputs["[]"])
	}
}

// TestGenerateMock: the mock backend runs with the engine flags' defaults
// (which are not options the user set).
func TestGenerateMock(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"generate", "--backend", "mock", "-p", "hi", "--max-tokens", "1"}
	if err := newApp(&out, &errs).Run(args); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if !strings.Contains(out.String(), "model mock on mock") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestGenerateWaitsForQueueRoom: more prompts than the engine runs and
// queues at once (--max-num-seqs 1, --max-pending 1) are not refused as
// overload: each waits for room, and the output keeps prompt order. The
// same holds for --score.
func TestGenerateWaitsForQueueRoom(t *testing.T) {
	args := []string{"generate", "--max-pending", "1", "--max-num-seqs", "1"}
	for i := range 6 {
		args = append(args, "-p", fmt.Sprintf("prompt number %d", i))
	}
	for _, tc := range []struct {
		flags  []string
		header string // of prompt i, with the text that must follow it
	}{
		{[]string{"--max-tokens", "4", "--ignore-eos"}, "--- prompt %d (4 tokens, finish length)\nprompt number %[1]d"},
		{[]string{"--max-tokens", "1", "--ignore-eos"}, "--- prompt %d (1 tokens, finish length)\nprompt number %[1]d"},
		{[]string{"--score"}, "--- prompt %d: 4 tokens, 3 scored"},
	} {
		var out, errs bytes.Buffer
		if err := newApp(&out, &errs).Run(append(args, tc.flags...)); err != nil {
			t.Fatalf("%v: %v\n%s", tc.flags, err, errs.String())
		}
		rest := out.String()
		for i := range 6 {
			at := strings.Index(rest, fmt.Sprintf(tc.header, i))
			if at < 0 {
				t.Fatalf("%v: prompt %d missing or out of order:\n%s", tc.flags, i, out.String())
			}
			rest = rest[at:]
		}
	}
}

// TestGenerateRefusesArguments: a stray argument is an error, not ignored
// (urfave/cli also stops reading flags at the first argument, so the flags
// after it would be ignored too).
func TestGenerateRefusesArguments(t *testing.T) {
	var out, errs bytes.Buffer
	err := newApp(&out, &errs).Run([]string{"generate", "extra-arg", "--max-tokens", "1"})
	if err == nil || !strings.Contains(err.Error(), `unexpected arguments ["extra-arg" "--max-tokens" "1"]`) {
		t.Errorf("err = %v, want the arguments named; output:\n%s", err, out.String())
	}
}

// TestGenerateIgnoresGenerationConfig: generate takes its sampling from
// its own flags, not from a checkpoint's generation_config.json, so it
// must not log that the file's defaults are in force, and it refuses
// --generation-config rather than ignore it.
func TestGenerateIgnoresGenerationConfig(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	if err := os.CopyFS(ckpt, os.DirFS("../../testdata/gpt2-tiny")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ckpt, "generation_config.json"), []byte(`{"temperature": 0.7, "top_k": 40}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if err := newApp(&out, &errs).Run([]string{"generate", "--model", ckpt, "-p", "hi", "--max-tokens", "1"}); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if strings.Contains(errs.String(), "sampling defaults") {
		t.Errorf("generate logs defaults it does not apply:\n%s", errs.String())
	}
	for _, v := range []string{"vllm", ckpt} {
		out.Reset()
		errs.Reset()
		err := newApp(&out, &errs).Run([]string{"generate", "--model", ckpt, "-p", "hi", "--max-tokens", "1", "--generation-config", v})
		if err == nil || !strings.Contains(err.Error(), "--generation-config") {
			t.Errorf("--generation-config %s: err = %v, want a refusal naming the flag", v, err)
		}
	}
}

// TestSpecialTokensInPrompts: a special token written in a prompt is that
// token, as the server's completions and /tokenize read it (and vLLM, with
// Hugging Face's tokenizers), not its characters: generate and --score
// see the same ids a request would.
func TestSpecialTokensInPrompts(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"generate", "--score", "--prompt", "Hi<|endoftext|>there"}
	if err := newApp(&out, &errs).Run(args); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if got := out.String(); !strings.Contains(got, "3 tokens") || !strings.Contains(got, `"<|endoftext|>"`) {
		t.Errorf("<|endoftext|> was not one token:\n%s", got)
	}
}

// TestGenerateSeedZero: --seed 0 is a seed, as a request's "seed": 0 is:
// two runs sample the same text (unseeded, each run's engine draws its
// own seeds from the clock).
func TestGenerateSeedZero(t *testing.T) {
	run := func() string {
		var out, errs bytes.Buffer
		args := []string{"generate", "--prompt", "Hello there", "--max-tokens", "24", "--ignore-eos", "--temperature", "1", "--seed", "0"}
		if err := newApp(&out, &errs).Run(args); err != nil {
			t.Fatalf("%v\n%s", err, errs.String())
		}
		return out.String()
	}
	if a, b := run(), run(); a != b {
		t.Errorf("--seed 0 sampled two texts:\n%s\n%s", a, b)
	}
}

// TestGenerateChat: --chat renders the conversation with qwen3-tiny's chat
// template and prints the rendered prompt and the reply; an even number of
// turns, and a model without a template, are refused with what to do.
func TestGenerateChat(t *testing.T) {
	var out, errb bytes.Buffer
	err := newApp(&out, &errb).Run([]string{"generate", "--chat", "--model", "../../testdata/qwen3-tiny", "--tokenizer", "qwen2.5",
		"--system", "Be brief.", "--chat-template-kwargs", `{"enable_thinking": false}`, "--max-tokens", "4", "--ignore-eos", "-p", "Hello!"})
	if err != nil {
		t.Fatal(err, errb.String())
	}
	for _, want := range []string{"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>", "--- reply (4 tokens, finish length)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for args, want := range map[string]string{
		"--chat -p a -p b": "odd number",
		"--chat":           "no chat template",
		"--system x":       "need --chat",
	} {
		err := newApp(io.Discard, io.Discard).Run(append([]string{"generate"}, strings.Fields(args)...))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
}
