// Writes golden_variants.json: tokenizer.json variants built from the tiny
// fixture (one normalizer, pre-tokenizer or added-token option changed per
// variant) with the ids, decoding and decoding without specials that Hugging
// Face's Rust tokenizers gives for a set of tricky strings
// (add_special_tokens=false). See ../README.md.
//
//   mkdir /tmp/ref && cd /tmp/ref && npm install @anush008/tokenizers@0.6.0
//   NODE_PATH=/tmp/ref/node_modules node make_variants.js \
//     ../../../llm/tokenizer/testdata/tiny/tokenizer.json > golden_variants.json
const fs = require('fs');
const {Tokenizer} = require('@anush008/tokenizers');

const tiny = JSON.parse(fs.readFileSync(process.argv[2]));
const clone = o => JSON.parse(JSON.stringify(o));
const byteLevel = (prefix, regex) => ({type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: false, use_regex: regex});
const split = (pattern, behavior, invert) => ({type: 'Split', pattern, behavior, invert});
const withSplit = s => { const t = clone(tiny); t.pre_tokenizer.pretokenizers[0] = s; return t; };
const qwenRegex = tiny.pre_tokenizer.pretokenizers[0].pattern;
const llamaRegex = {Regex: qwenRegex.Regex.replace('|\\p{N}|', '|\\p{N}{1,3}|')};
const added = (id, content, o) => Object.assign({id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: false}, o);
const addedTokens = [
  added(268, '<|endoftext|>', {special: true}),
  added(269, '<think>', {}),
  added(270, '<L>', {lstrip: true, special: true}),
  added(271, '<R>', {rstrip: true}),
  added(272, 'word', {single_word: true}),
  added(273, 'éé', {normalized: true}),
  added(274, '<LR>', {lstrip: true, rstrip: true, single_word: true}),
  added(275, 'İx', {normalized: true}),
  added(276, ' sp', {}),
];

const variants = {
  bytelevel_regex: Object.assign(clone(tiny), {normalizer: null, pre_tokenizer: byteLevel(false, true)}),
  bytelevel_prefix_space: Object.assign(clone(tiny), {normalizer: null, pre_tokenizer: byteLevel(true, true)}),
  lowercase: Object.assign(clone(tiny), {normalizer: {type: 'Lowercase'}, pre_tokenizer: byteLevel(false, true)}),
  nfkd_nfkc: Object.assign(clone(tiny), {normalizer: {type: 'Sequence', normalizers: [{type: 'NFKD'}, {type: 'NFKC'}]}}),
  llama3_split: withSplit(split(llamaRegex, 'Isolated', false)),
  digits: Object.assign(clone(tiny), {pre_tokenizer: {type: 'Sequence', pretokenizers: [{type: 'Digits', individual_digits: false}, byteLevel(true, true)]}}),
  split_removed: withSplit(split(qwenRegex, 'Removed', false)),
  split_merged_previous: withSplit(split(qwenRegex, 'MergedWithPrevious', false)),
  split_merged_next_invert: withSplit(split(qwenRegex, 'MergedWithNext', true)),
  split_contiguous_invert: withSplit(split(qwenRegex, 'Contiguous', true)),
  split_string: withSplit(split({String: ' '}, 'MergedWithNext', false)),
  split_other_regex: withSplit(split({Regex: '\\s+|\\d'}, 'Isolated', false)),
  added_options: Object.assign(clone(tiny), {added_tokens: addedTokens}),
  added_options_lowercase: Object.assign(clone(tiny), {added_tokens: addedTokens, normalizer: {type: 'Lowercase'}}),
};

const texts = [
  '', ' ', '  ', 'a ', 'a  ', ' a', '  a', '\n', '\n\n', '\n\n  ', '\n\n  x', 'x\n\n  ', ' \n ', 'a\t\tb', '\r\n\r\n',
  "he's", "HE'S", "they'LL", "I'M", "we'Ve", "it'd", "''s", "' s", "x'", "DON'T", "'ſx", "'İ",
  '123', '1234567', ' 12', 'a1b2', '١٢٣', 'Ⅻ', '²³', '½',
  'héllo', 'he\u0301llo', 'İstanbul', 'ΣΑΣ', 'straße', 'ǅ', 'ﬁ', 'Ⓐb', 'Ǆ',
  '日本語のテキスト', 'Привет мир', 'नमस्ते', '👨‍👩‍👧‍👦', '👍🏽', 'a👍b', 'a\u200db',
  'a\u00a0b', '\u3000x', '\u2028', '\u0085', '\x00', '\ufeff',
  '<|endoftext|>', 'a<|endoftext|>b', '<think>x</think>', ' <L> ', 'a  <L>b', '<R>  x', 'word', 'a word b', 'awordb',
  '_word', 'wordé', 'éé', 'e\u0301e\u0301', 'x <LR> y', 'x<LR>y', 'İx', 'i\u0307x', 'ix', ' sp', 'a sp', 'asp',
  'x'.repeat(300), ' '.repeat(40) + 'x', '9'.repeat(50),
];
const alphabet = [' ', '  ', '\t', '\n', '\r', "'", 's', 'S', 'll', 'LL', 'd', 'a', 'é', 'e\u0301', 'İ', 'Σ', '日', '1', '٣', '½',
  '!', '.', '_', '🎉', '\u200d', '\u00a0', '\u3000', '<think>', '<|endoftext|>', '<L>', '<R>', '<LR>', 'word', 'sp', 'ǅ'];
let seed = 12345; // a fixed LCG, so the strings are the same on every run
const rnd = n => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
for (let i = 0; i < 120; i++) {
  let s = '';
  for (let j = 1 + rnd(10); j > 0; j--) s += alphabet[rnd(alphabet.length)];
  texts.push(s);
}

(async () => {
  const out = [];
  for (const [name, json] of Object.entries(variants)) {
    const tok = Tokenizer.fromString(JSON.stringify(json));
    const cases = [];
    for (const text of texts) {
      const ids = (await tok.encode(text, null, {addSpecialTokens: false})).getIds();
      cases.push({text, ids, decoded: await tok.decode(ids, false), decoded_skip: await tok.decode(ids, true)});
    }
    out.push({name, tokenizer: json, cases});
  }
  const meta = {
    generator: 'testdata/tokenizers/variants/make_variants.js',
    library: '@anush008/tokenizers (Hugging Face tokenizers Rust crate 0.22.2 via N-API)',
    library_version: '0.6.0',
    add_special_tokens: false,
    base_tokenizer: 'llm/tokenizer/testdata/tiny/tokenizer.json',
  };
  process.stdout.write('{"meta":' + JSON.stringify(meta) + ',\n"variants":[\n' +
    out.map(v => '{"name":' + JSON.stringify(v.name) + ',"tokenizer":' + JSON.stringify(v.tokenizer) + ',"cases":[\n' +
      v.cases.map(c => JSON.stringify(c)).join(',\n') + ']}').join(',\n') + ']}\n');
})();
