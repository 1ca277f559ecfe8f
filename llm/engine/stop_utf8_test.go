package engine_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// scriptBackend generates, for a sequence whose one-token prompt is p, the
// bytes of scripts[p] in order, whatever the batch: a model whose output a
// test chooses byte by byte, split UTF-8 characters and stray bytes
// included.
type scriptBackend struct {
	scripts [][]byte
	prompt  map[uint64]int // sequence id -> its prompt token
	rows    []engine.SampleRow
}

func (b *scriptBackend) MaxKVBlocks(int) (int, error) { return 256, nil }
func (b *scriptBackend) AllocateKV(int, int) error    { return nil }
func (b *scriptBackend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	b.rows = b.rows[:0]
	for _, s := range batch.Seqs {
		if s.StartPos == 0 {
			b.prompt[uint64(s.ID)] = s.Tokens[0]
		}
		if s.Sample {
			script := b.scripts[b.prompt[uint64(s.ID)]]
			b.rows = append(b.rows, engine.SampleRow{Argmax: int(script[s.StartPos+len(s.Tokens)-1])})
		}
	}
	return b.rows, nil
}

// TestStopStringsOverSplitCharacters checks stop strings against a
// reference on output whose characters arrive a byte per token (two-,
// three- and four-byte characters cut across tokens, stray continuation
// bytes, lead bytes cut short), with min_tokens and
// include_stop_str_in_output: after token k, past min_tokens, the earliest
// stop string that ends in the text token k added ends the request there,
// the text cut before it (after it when included); without one the request
// runs to max_tokens and ends with the whole decoded text. Every streamed
// piece must be valid UTF-8 (a client's JSON string), and the pieces must
// add up to the text.
func TestStopStringsOverSplitCharacters(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	pieces := [][]byte{
		[]byte("a"), []byte("b"), []byte(" "), []byte("é"), []byte("€"), []byte("😀"),
		{0x80}, {0xe2, 0x82}, {0xf0, 0x9f}, {0xc3}, {0xff},
	}
	const numScripts, n = 64, 24
	scripts := make([][]byte, numScripts)
	for i := range scripts {
		for len(scripts[i]) < n {
			scripts[i] = append(scripts[i], pieces[rng.IntN(len(pieces))]...)
		}
		scripts[i] = scripts[i][:n]
	}
	tok := mock.NewTokenizer()
	info := llm.ModelInfo{ID: "script", MaxModelLen: 256, VocabSize: tok.VocabSize(), EOSTokenID: mock.EOSTokenID}
	e, err := engine.New(&scriptBackend{scripts: scripts, prompt: map[uint64]int{}}, tok, info, engine.Config{MaxNumSeqs: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	var wg sync.WaitGroup
	stopped, held := 0, 0 // trials a stop string ends; trials min_tokens saves from one
	for trial := range 400 {
		p := trial % numScripts
		script := scripts[p]
		// The text as it streams: after[k] is the decoded text of the
		// first k tokens, without the bytes of a character still open.
		dec := tok.NewDecoder(true)
		after := []string{""}
		for _, b := range script {
			after = append(after, after[len(after)-1]+dec.Add(int(b)))
		}
		whole := after[n] + dec.Flush()
		// Stop strings: pieces of the text at character boundaries (a
		// U+FFFD among them now and then), and one never there.
		var stops []string
		runes := []rune(whole)
		for range rng.IntN(4) { // none a quarter of the time: the whole text
			i := rng.IntN(len(runes))
			j := min(len(runes), i+1+rng.IntN(3))
			stops = append(stops, string(runes[i:j]))
		}
		if len(stops) == 0 || rng.IntN(4) == 0 {
			stops = append(stops, "zz\ufffd")
		}
		minTokens := rng.IntN(6)
		include := rng.IntN(2) == 0

		want, wantStop, wantTokens := whole, "", n
		for k := minTokens + 1; k <= n && wantStop == ""; k++ {
			at := len(after[k])
			for _, s := range stops {
				from := max(0, len(after[k-1])-len(s)+1)
				if i := strings.Index(after[k][from:], s); i >= 0 && from+i < at {
					at, wantStop = from+i, s
				}
			}
			if wantStop != "" {
				want, wantTokens = after[k][:at], k
				if include {
					want = after[k][:at+len(wantStop)]
				}
			}
		}

		if wantStop != "" {
			stopped++
		}
		for _, s := range stops {
			if minTokens > 0 && strings.Contains(after[minTokens], s) {
				held++
				break
			}
		}
		params := llm.SamplingParams{MaxTokens: n, MinTokens: minTokens, Stop: stops, IncludeStopStrInOutput: include, IgnoreEOS: true}
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{p}, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			var text strings.Builder
			var last llm.Event
			tokens := 0
			for ev := range ch {
				if !utf8.ValidString(ev.Text) {
					t.Errorf("script %d stops %q: streamed piece %q is not UTF-8", p, stops, ev.Text)
				}
				text.WriteString(ev.Text)
				tokens += len(ev.TokenIDs)
				if ev.Finish != "" {
					last = ev
				}
			}
			if text.String() != want || last.StopString != wantStop || tokens != wantTokens || last.CompletionTokens != wantTokens {
				t.Errorf("script %q stops %q min_tokens %d include %v:\n got %q stop %q after %d tokens (%d counted)\nwant %q stop %q after %d",
					script, stops, minTokens, include, text.String(), last.StopString, tokens, last.CompletionTokens, want, wantStop, wantTokens)
			}
		})
		if trial%8 == 7 {
			wg.Wait() // a few at once share steps, without piling up
		}
	}
	wg.Wait()
	t.Logf("%d of 400 stopped by a string, %d with a match made under min_tokens", stopped, held)
	if stopped < 100 || stopped == 400 || held == 0 {
		t.Errorf("the generator no longer mixes stops, full lengths and min_tokens (%d stopped, %d held)", stopped, held)
	}
}
