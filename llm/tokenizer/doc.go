// Package tokenizer provides tinyserve's [llm.Tokenizer] implementations and
// finds the right one for a model:
//
//   - [GPT2] is GPT-2's byte-level BPE (the r50k_base encoding of
//     github.com/pkoukk/tiktoken-go, with its ranks embedded by
//     tiktoken-go-loader), so the built-in model needs no files.
//   - [ParseHF] and [LoadHF] read a Hugging Face tokenizer.json in pure Go
//     (no cgo): byte-level BPE models as GPT-2, Qwen2/2.5/3 and Llama 3 ship
//     them. Components the package does not implement are rejected with an
//     error that names them, rather than silently tokenizing differently.
//     Encode adds no template tokens; AddSpecialTokens adds what the
//     file's post-processor would (Llama 3's <|begin_of_text|>).
//   - [Qwen] is Qwen's tokenizer.json embedded in the binary (gzip), so a
//     Qwen model needs no tokenizer files either.
//   - [Load] turns what a user typed (gpt2, qwen2.5, a file, a model folder
//     or a Hugging Face id) into a tokenizer, looking only at local files.
//
// Both tokenizers are checked against ids produced by the reference libraries
// (OpenAI's tiktoken, Hugging Face's Rust tokenizers) in the repository's
// testdata/tokenizers goldens.
package tokenizer
