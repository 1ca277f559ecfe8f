package tokenizer

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// specialTokensAdder is the method set package llm declares as
// llm.SpecialTokensAdder; both tokenizers must have exactly it, so that a
// caller holding an llm.Tokenizer can add BOS by type assertion.
type specialTokensAdder interface {
	AddSpecialTokens(ids []int) []int
	BOSTokenID() int
}

var (
	_ specialTokensAdder = (*HFTokenizer)(nil)
	_ specialTokensAdder = (*GPT2Tokenizer)(nil)
)

// TestAddSpecialTokens checks the templates of the real tokenizers: Llama
// 3.1's post-processor puts <|begin_of_text|> in front, exactly once;
// Qwen3's (ByteLevel) and GPT-2 add nothing, as Hugging Face's
// encode(add_special_tokens=True) does for each. The input is never
// modified and the result never aliases it.
func TestAddSpecialTokens(t *testing.T) {
	tests := []struct {
		name   string
		tok    specialTokensAdder
		bos    int
		prefix []int
	}{
		{"llama3_1", llama(t), 128000, []int{128000}},
		{"qwen3", qwen(t), -1, nil},
		{"gpt2", gpt2(t), -1, nil},
		{"tiny", tiny(t), -1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tok.BOSTokenID(); got != tc.bos {
				t.Errorf("BOSTokenID = %d, want %d", got, tc.bos)
			}
			for _, ids := range [][]int{nil, {}, {9906, 11, 1917}, {128000, 5}} {
				in := slices.Clone(ids)
				got := tc.tok.AddSpecialTokens(in)
				if !slices.Equal(in, ids) {
					t.Fatalf("AddSpecialTokens modified its input: %v -> %v", ids, in)
				}
				want := append(slices.Clone(tc.prefix), ids...)
				if !slices.Equal(got, want) {
					t.Errorf("AddSpecialTokens(%v) = %v, want %v", ids, got, want)
				}
				if len(in) > 0 && len(got) > 0 && &got[len(got)-1] == &in[len(in)-1] {
					t.Errorf("AddSpecialTokens(%v) shares its input's array", ids)
				}
			}
		})
	}
}

// TestLlamaGoldensWithBOS checks Encode followed by AddSpecialTokens on the
// Llama 3.1 goldens: Hugging Face's add_special_tokens=True gives the
// golden ids (add_special_tokens=False) with 128000 in front, and none of
// the goldens' texts makes 128000 itself, so it occurs exactly once.
func TestLlamaGoldensWithBOS(t *testing.T) {
	l := llama(t)
	for _, path := range []string{goldenLlama, goldenLlamaSp} {
		for i, c := range loadGolden(t, path) {
			got := l.AddSpecialTokens(l.Encode(c.Text, true))
			want := append([]int{128000}, c.IDs...)
			if !slices.Equal(got, want) {
				t.Errorf("%s case %d %q:\n got %v\nwant %v", path, i, c.Text, got, want)
			}
			if n := count(got, 128000); n != 1 {
				t.Errorf("%s case %d: 128000 occurs %d times", path, i, n)
			}
		}
	}
}

func count(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// TestPostProcessors swaps the tiny fixture's post_processor for each kind
// Hugging Face has and checks the template it gives for one sequence, and
// that what cannot be represented is refused by name. Ids 268
// (<|endoftext|>) and 269 (<think>) are the fixture's added tokens; 100 and
// 101 are ordinary vocabulary entries.
func TestPostProcessors(t *testing.T) {
	data, err := os.ReadFile(tinyJSON)
	if err != nil {
		t.Fatal(err)
	}
	const orig = `"post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`
	if !strings.Contains(string(data), orig) {
		t.Fatal("the fixture's post_processor changed; fix the test")
	}
	const eotTable = `"special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [268], "tokens": ["<|endoftext|>"]}, "T": {"id": "T", "ids": [100, 101], "tokens": ["x", "y"]}}`
	tests := []struct {
		name        string
		pp          string
		opts        HFOptions
		want        []int // AddSpecialTokens([7, 8])
		bos         int
		err         string // non-empty: ParseHF fails mentioning this
		unsupported bool
	}{
		{name: "none", pp: `null`, want: []int{7, 8}, bos: -1},
		{name: "bytelevel", pp: `{"type": "ByteLevel", "trim_offsets": true}`, want: []int{7, 8}, bos: -1},
		{name: "template bos", pp: `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], ` + eotTable + `}`,
			want: []int{268, 7, 8}, bos: 268},
		{name: "template eos", pp: `{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}], ` + eotTable + `}`,
			want: []int{7, 8, 268}, bos: -1},
		{name: "template multi-id token", pp: `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "T", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 1}}, {"SpecialToken": {"id": "T", "type_id": 0}}], ` + eotTable + `}`,
			want: []int{100, 101, 7, 8, 100, 101}, bos: 100},
		{name: "sequence as llama 3", pp: `{"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], ` + eotTable + `}]}`,
			want: []int{268, 7, 8}, bos: 268},
		// Each processor of a Sequence wraps the previous one's output.
		{name: "sequence of templates", pp: `{"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}], ` + eotTable + `}, {"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "T", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], ` + eotTable + `}]}]}`,
			want: []int{100, 101, 7, 8, 268}, bos: 100},
		{name: "roberta", pp: `{"type": "RobertaProcessing", "sep": ["<|endoftext|>", 268], "cls": ["<think>", 269], "trim_offsets": true, "add_prefix_space": false}`,
			want: []int{269, 7, 8, 268}, bos: 269},
		{name: "bert", pp: `{"type": "BertProcessing", "sep": ["b", 101], "cls": ["a", 100]}`,
			want: []int{100, 7, 8, 101}, bos: 100},
		// tokenizer_config.json's flags count only when the post-processor
		// adds nothing.
		{name: "add_bos_token", pp: `null`, opts: HFOptions{BOSToken: "<think>", AddBOSToken: true}, want: []int{269, 7, 8}, bos: 269},
		{name: "add_bos and add_eos", pp: `{"type": "ByteLevel"}`, opts: HFOptions{BOSToken: "<think>", EOSToken: "<|endoftext|>", AddBOSToken: true, AddEOSToken: true},
			want: []int{269, 7, 8, 268}, bos: 269},
		{name: "bos_token without add_bos_token", pp: `null`, opts: HFOptions{BOSToken: "<think>"}, want: []int{7, 8}, bos: -1},
		{name: "template wins over add_bos_token", pp: `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], ` + eotTable + `}`,
			opts: HFOptions{BOSToken: "<think>", AddBOSToken: true}, want: []int{268, 7, 8}, bos: 268},

		{name: "unknown type", pp: `{"type": "Fancy"}`, err: `post_processor "Fancy"`, unsupported: true},
		{name: "unknown inside sequence", pp: `{"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "Fancy"}]}`, err: `post_processor "Fancy"`, unsupported: true},
		{name: "template with B", pp: `{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "B", "type_id": 0}}], ` + eotTable + `}`, err: `sequence "B"`, unsupported: true},
		{name: "template without A", pp: `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "T", "type_id": 0}}], ` + eotTable + `}`, err: "without $A", unsupported: true},
		{name: "template with A twice", pp: `{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], ` + eotTable + `}`, err: "$A twice", unsupported: true},
		{name: "template piece of another kind", pp: `{"type": "TemplateProcessing", "single": ["$A"], ` + eotTable + `}`, err: "TemplateProcessing"},
		{name: "template empty piece", pp: `{"type": "TemplateProcessing", "single": [{}], ` + eotTable + `}`, err: "piece 0", unsupported: true},
		{name: "template token missing", pp: `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], ` + eotTable + `}`, err: `"<s>" missing`},
		{name: "template id outside vocab", pp: `{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "X", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"X": {"id": "X", "ids": [270], "tokens": ["X"]}}}`, err: "adds id 270"},
		{name: "roberta without cls", pp: `{"type": "RobertaProcessing", "sep": ["</s>", 2]}`, err: "cls"},
		{name: "bert negative id", pp: `{"type": "BertProcessing", "sep": ["b", -1], "cls": ["a", 100]}`, err: "adds id -1"},
		{name: "add_bos_token without bos_token", pp: `null`, opts: HFOptions{AddBOSToken: true}, err: "no bos_token"},
		{name: "add_bos_token with unknown bos", pp: `null`, opts: HFOptions{AddBOSToken: true, BOSToken: "<s>"}, err: `"<s>" is not in the vocabulary`},
		{name: "add_eos_token without eos_token", pp: `null`, opts: HFOptions{AddEOSToken: true}, err: "no eos_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(string(data), orig, `"post_processor": `+tc.pp, 1)
			tok, err := ParseHF([]byte(edited), tc.opts)
			if tc.err != "" {
				if err == nil {
					t.Fatalf("no error, template %v", tok.AddSpecialTokens(nil))
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %q does not mention %q", err, tc.err)
				}
				if errors.Is(err, ErrUnsupported) != tc.unsupported {
					t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v", !tc.unsupported, tc.unsupported)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.AddSpecialTokens([]int{7, 8}); !slices.Equal(got, tc.want) {
				t.Errorf("AddSpecialTokens([7 8]) = %v, want %v", got, tc.want)
			}
			if got := tok.BOSTokenID(); got != tc.bos {
				t.Errorf("BOSTokenID = %d, want %d", got, tc.bos)
			}
		})
	}
}

// TestParseHFConfig checks what tokenizer_config.json contributes: the
// real Llama 3.1 and Qwen3 files, and the shapes a token setting comes in
// (a string, an AddedToken object, null).
func TestParseHFConfig(t *testing.T) {
	tests := []struct {
		name string
		data string // or a path when it starts with "../"
		want HFOptions
		err  bool
	}{
		{"llama3_1", fixtures + "llama3_1/tokenizer_config.json", HFOptions{EOSToken: "<|eot_id|>", BOSToken: "<|begin_of_text|>"}, false},
		{"qwen3", fixtures + "qwen3/tokenizer_config.json", HFOptions{EOSToken: "<|im_end|>"}, false},
		{"flags", `{"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>", "add_bos_token": true, "add_eos_token": true}`,
			HFOptions{EOSToken: "</s>", BOSToken: "<s>", AddBOSToken: true, AddEOSToken: true}, false},
		{"nulls", `{"bos_token": null, "eos_token": null, "add_bos_token": null, "add_eos_token": false}`, HFOptions{}, false},
		{"flag not a bool", `{"add_bos_token": "yes"}`, HFOptions{}, true},
		{"not json", `{`, HFOptions{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			if strings.HasPrefix(tc.data, "../") {
				var err error
				if data, err = os.ReadFile(tc.data); err != nil {
					t.Fatal(err)
				}
			}
			got, err := parseHFConfig(data)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLoadHFAddBOSFromConfig loads a folder whose tokenizer_config.json
// sets add_bos_token and whose tokenizer.json adds nothing: LoadHF reads
// the flag, so AddSpecialTokens adds the BOS.
func TestLoadHFAddBOSFromConfig(t *testing.T) {
	data, err := os.ReadFile(tinyJSON)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/tokenizer.json", data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"bos_token": "<think>", "eos_token": "<|endoftext|>", "add_bos_token": true}`
	if err := os.WriteFile(dir+"/tokenizer_config.json", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadHF(dir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.AddSpecialTokens([]int{1}); !slices.Equal(got, []int{269, 1}) {
		t.Errorf("AddSpecialTokens([1]) = %v, want [269 1]", got)
	}
	if tok.BOSTokenID() != 269 || tok.EOSTokenID() != 268 {
		t.Errorf("BOS %d EOS %d, want 269 268", tok.BOSTokenID(), tok.EOSTokenID())
	}
}
