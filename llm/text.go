package llm

// Tokenizer turns text into token ids and back. Implementations are safe for
// concurrent use.
type Tokenizer interface {
	// Encode tokenizes text. Special tokens written in the text (such as
	// <|endoftext|>) become their ids only when allowSpecial is true; otherwise
	// they are encoded as ordinary text.
	Encode(text string, allowSpecial bool) []int
	// Decode turns ids into text, leaving out special tokens when skipSpecial
	// is true. Bytes that do not form valid UTF-8 become U+FFFD.
	Decode(ids []int, skipSpecial bool) string
	// NewDecoder returns an incremental decoder for streaming one sequence.
	NewDecoder(skipSpecial bool) Decoder
	// VocabSize is the number of token ids, special ones included.
	VocabSize() int
	// EOSTokenID is the end-of-text token, or -1 when there is none.
	EOSTokenID() int
	// IsSpecial reports whether id is a special token.
	IsSpecial(id int) bool
}

// SpecialTokensAdder is a Tokenizer whose encodings get template tokens
// when special tokens are asked for, as Hugging Face's
// encode(text, add_special_tokens=True) adds them: Llama 3's
// <|begin_of_text|> in front, from its tokenizer.json's post-processor.
// A Tokenizer that does not implement it adds nothing (GPT-2, Qwen).
type SpecialTokensAdder interface {
	// AddSpecialTokens returns ids with the template tokens for a single
	// sequence added; ids is not modified.
	AddSpecialTokens(ids []int) []int
	// BOSTokenID is the beginning-of-sequence token the template adds,
	// or -1 when it adds none.
	BOSTokenID() int
}

// Decoder turns a stream of token ids into text without ever emitting half a
// UTF-8 character. It is not safe for concurrent use.
type Decoder interface {
	// Add appends one token and returns the text that became complete.
	Add(id int) string
	// Flush returns what is left, with incomplete characters as U+FFFD.
	Flush() string
}
