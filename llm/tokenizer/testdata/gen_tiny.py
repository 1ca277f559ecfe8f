# Writes tiny/tokenizer.json: a small byte-level BPE in the Qwen layout, for
# loader, option and fuzz tests (the real Qwen file is 11 MB).
#   python3 gen_tiny.py
import json

def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

bc = byte_chars()
vocab = {bc[b]: b for b in range(256)}
merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["l", "l"], ["e", "ll"], ["h", "ell"], ["hell", "o"], ["Ġ", "w"], ["o", "r"], ["Ġw", "or"], ["Ġwor", "l"], ["Ġworl", "d"]]
for a, b in merges:
    vocab.setdefault(a + b, len(vocab))
tok = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [
        {"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
        {"id": len(vocab) + 1, "content": "<think>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
    ],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
              "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": merges},
}
with open("tiny/tokenizer.json", "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
with open("tiny/tokenizer_config.json", "w", encoding="utf-8") as f:
    json.dump({"eos_token": {"content": "<|endoftext|>", "__type": "AddedToken"}}, f)
