package main

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChatFlagsRefusedAtStart: an unknown parser, or auto tool choice
// without a parser, is refused before the model loads, as vLLM refuses it.
func TestChatFlagsRefusedAtStart(t *testing.T) {
	for args, want := range map[string][]string{
		"unknown tool parser":      {"--tool-call-parser", "mistral"},
		"unknown reasoning parser": {"--reasoning-parser", "deepseek_r1"},
		"auto without a parser":    {"--enable-auto-tool-choice"},
	} {
		err := newApp(io.Discard).RunContext(context.Background(), append([]string{"s", "--backend", "mock", "--port", "0"}, want...))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want[0], args)
	}
}
