package tokenizer

import (
	"bytes"
	"compress/gzip"
	_ "embed" // the built-in Qwen tokenizer's files
	"fmt"
	"io"
	"sync"
)

// BuiltinQwen is the tokenizer spec that selects the built-in Qwen
// tokenizer ([Qwen]): Load, Locate and LoadWithFiles accept it as they
// accept "gpt2", needing no files.
const BuiltinQwen = "qwen2.5"

// The files of the built-in Qwen tokenizer (see builtin/qwen/README.md for
// their origin and checksums). Read-only: QwenConfigJSON hands out copies.
var (
	//go:embed builtin/qwen/tokenizer.json.gz
	qwenTokenizerGz []byte
	//go:embed builtin/qwen/tokenizer_config.json
	qwenConfigJSON []byte
)

// qwenBuiltin parses the embedded files once, on first use: the 11 MB
// tokenizer.json takes a good part of a second to decompress and parse,
// too long to repeat per call, and a program that never asks for Qwen
// should not pay for it at start. The tokenizer it keeps is never modified
// after parsing (its BPE memo only remembers results), so sharing it is
// safe.
var qwenBuiltin = sync.OnceValues(parseBuiltinQwen)

// parseBuiltinQwen decompresses and parses the embedded Qwen files.
func parseBuiltinQwen() (*HFTokenizer, error) {
	zr, err := gzip.NewReader(bytes.NewReader(qwenTokenizerGz))
	if err != nil {
		return nil, fmt.Errorf("qwen tokenizer: embedded tokenizer.json.gz: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("qwen tokenizer: embedded tokenizer.json.gz: %w", err)
	}
	opts, err := parseHFConfig(qwenConfigJSON)
	if err != nil {
		return nil, fmt.Errorf("qwen tokenizer: embedded tokenizer_config.json: %w", err)
	}
	t, err := ParseHF(data, opts)
	if err != nil {
		return nil, fmt.Errorf("qwen tokenizer: embedded tokenizer.json: %w", err)
	}
	return t, nil
}

// Qwen returns the built-in Qwen tokenizer, for Qwen2, Qwen2.5 and Qwen3
// models without tokenizer files: Qwen3's tokenizer.json (Qwen2.5's
// vocabulary plus <think>, </think>, <tool_response> and
// </tool_response>, 151669 ids), with <|im_end|> as end of sequence as its
// tokenizer_config.json says. It reads no files: they are embedded in the
// binary. The first call decompresses and parses them; every call returns
// the same tokenizer, which is safe for concurrent use.
func Qwen() (*HFTokenizer, error) { return qwenBuiltin() }

// QwenConfigJSON returns the built-in Qwen tokenizer's tokenizer_config.json
// (its chat_template, special-token settings), a fresh copy the caller may
// keep or change.
func QwenConfigJSON() []byte { return bytes.Clone(qwenConfigJSON) }
