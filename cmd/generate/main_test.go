package main

import (
	"bytes"
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
	} {
		var out, errs bytes.Buffer
		if err := newApp(&out, &errs).Run(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
