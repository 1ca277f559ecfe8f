package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/tinyserve/tinyserve/internal/pyrandom"
	"github.com/tinyserve/tinyserve/llm"
)

// SchemaVersion is the sidecar's schema_version.
const SchemaVersion = "1.0"

// SourceText is the text every prompt is built from, after its prefix.
const SourceText = "Analyze how continuous batching, KV-cache allocation, request scheduling, " +
	"and GPU kernel execution affect latency and throughput in an inference " +
	"service. Use precise technical language and concrete reasoning. "

// Filler is appended, as one token, until a prompt reaches its target length.
const Filler = " benchmark"

// Row is one request of a prompt file. The JSON names are the file's keys.
type Row struct {
	Bucket             string `json:"bucket"`
	ID                 string `json:"id"`
	Prompt             string `json:"prompt"`
	PromptTokens       int    `json:"prompt_tokens"`
	TargetOutputTokens int    `json:"target_output_tokens"`
	TargetPromptTokens int    `json:"target_prompt_tokens"`
	Workload           string `json:"workload"`
}

// Generate builds the rows of a workload exactly as serving-inference's
// generate_prompts.py does for the same config and tokenizer:
//
//  1. one entry per request, buckets in file order, shuffled with Python's
//     random.Random(seed).shuffle;
//  2. request i's text is "<name> request <i:06d>. " + SourceText, encoded;
//     the one-token encoding of Filler is appended until the target length,
//     the ids are cut to it, decoded (special tokens skipped, no space
//     clean-up) and encoded again; prompt_tokens is that length;
//  3. the rows are checked as Python checks them (see ValidateRows).
//
// Text is encoded with special tokens recognised, as Hugging Face's encode
// does by default.
func Generate(cfg *Config, tok llm.Tokenizer) ([]Row, error) {
	if cfg == nil || tok == nil {
		return nil, errors.New("workload: nil config or tokenizer")
	}
	filler := tok.Encode(Filler, true)
	if len(filler) != 1 {
		return nil, fmt.Errorf("workload %s: the tokenizer encodes %q as %d tokens; the filler must be exactly one", cfg.Name, Filler, len(filler))
	}
	seq := requestBuckets(cfg)
	rows := make([]Row, len(seq))
	for i, b := range seq {
		ids := slices.Clone(tok.Encode(sourceText(cfg, i), true)) // appended to below; never touch the tokenizer's slice
		for len(ids) < b.PromptTokens {
			ids = append(ids, filler[0])
		}
		prompt := tok.Decode(ids[:b.PromptTokens], true)
		rows[i] = Row{
			Bucket:             b.Name,
			ID:                 rowID(cfg, i),
			Prompt:             prompt,
			PromptTokens:       len(tok.Encode(prompt, true)),
			TargetOutputTokens: b.OutputTokens,
			TargetPromptTokens: b.PromptTokens,
			Workload:           cfg.Name,
		}
	}
	if err := ValidateRows(rows, cfg); err != nil {
		return nil, fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	return rows, nil
}

// requestBuckets is the bucket of every request in file order: the buckets
// expanded in config order and shuffled with Python's
// random.Random(seed).shuffle. It needs no tokenizer, so Verify can check
// the row order without one.
func requestBuckets(cfg *Config) []Bucket {
	seq := make([]Bucket, 0, cfg.RequestCount)
	for _, b := range cfg.Buckets {
		for range b.Count {
			seq = append(seq, b)
		}
	}
	pyrandom.New(cfg.Seed).Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
	return seq
}

// sourceText is the text request i starts from, before it is cut or
// padded to its length in tokens.
func sourceText(cfg *Config, i int) string {
	return fmt.Sprintf("%s request %06d. ", cfg.Name, i) + SourceText
}

// rowID is request i's id.
func rowID(cfg *Config, i int) string { return fmt.Sprintf("%s_%06d", cfg.Name, i) }

// ValidateRows checks rows against their config as generate_prompts.py does
// (row count, unique ids, positive token counts, prompt length within the
// tolerance, bucket composition), and also that each row's workload and
// targets are those of its bucket.
func ValidateRows(rows []Row, cfg *Config) error {
	if len(rows) != cfg.RequestCount {
		return fmt.Errorf("%d rows, want request_count %d", len(rows), cfg.RequestCount)
	}
	ids := make(map[string]bool, len(rows))
	buckets := make(map[string]Bucket, len(cfg.Buckets))
	for _, b := range cfg.Buckets {
		buckets[b.Name] = b
	}
	counts := map[string]int{}
	for _, r := range rows {
		if ids[r.ID] {
			return fmt.Errorf("row id %q is not unique", r.ID)
		}
		ids[r.ID] = true
		if r.PromptTokens <= 0 || r.TargetOutputTokens <= 0 {
			return fmt.Errorf("row %s: token lengths must be positive (prompt_tokens %d, target_output_tokens %d)", r.ID, r.PromptTokens, r.TargetOutputTokens)
		}
		if d := r.PromptTokens - r.TargetPromptTokens; d > cfg.PromptTokenTolerance || -d > cfg.PromptTokenTolerance {
			return fmt.Errorf("row %s: prompt token count is outside tolerance: %d vs %d (+/-%d)", r.ID, r.PromptTokens, r.TargetPromptTokens, cfg.PromptTokenTolerance)
		}
		if r.Workload != cfg.Name {
			return fmt.Errorf("row %s: workload %q, want %q", r.ID, r.Workload, cfg.Name)
		}
		b, ok := buckets[r.Bucket]
		if !ok {
			return fmt.Errorf("row %s: bucket %q is not in the config", r.ID, r.Bucket)
		}
		if r.TargetPromptTokens != b.PromptTokens || r.TargetOutputTokens != b.OutputTokens {
			return fmt.Errorf("row %s: targets %d/%d do not match bucket %s (%d/%d)", r.ID, r.TargetPromptTokens, r.TargetOutputTokens, b.Name, b.PromptTokens, b.OutputTokens)
		}
		counts[r.Bucket]++
	}
	for _, b := range cfg.Buckets {
		if counts[b.Name] != b.Count {
			return fmt.Errorf("unstable bucket composition for %s: %d rows, want %d", b.Name, counts[b.Name], b.Count)
		}
	}
	return nil
}

// MarshalRows serializes rows as generate_prompts.py does: one
// json.dumps(row, sort_keys=True, separators=(",", ":")) per line, each
// followed by "\n", non-ASCII escaped.
func MarshalRows(rows []Row) []byte {
	var b []byte
	for _, r := range rows {
		b = append(b, `{"bucket":`...)
		b = appendPyString(b, r.Bucket)
		b = append(b, `,"id":`...)
		b = appendPyString(b, r.ID)
		b = append(b, `,"prompt":`...)
		b = appendPyString(b, r.Prompt)
		b = fmt.Appendf(b, `,"prompt_tokens":%d,"target_output_tokens":%d,"target_prompt_tokens":%d,"workload":`,
			r.PromptTokens, r.TargetOutputTokens, r.TargetPromptTokens)
		b = appendPyString(b, r.Workload)
		b = append(b, "}\n"...)
	}
	return b
}

// SHA256 returns the hex SHA-256 of a prompt file's bytes, as the sidecar
// records it.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// MarshalMetadata returns the sidecar for a workload whose prompt file has
// the given SHA-256: json.dumps(metadata, indent=2, sort_keys=True) + "\n".
func MarshalMetadata(cfg *Config, digest string) ([]byte, error) {
	meta := map[string]any{
		"generation_config": cfg.GenerationConfig(),
		"schema_version":    SchemaVersion,
		"workload_sha256":   digest,
	}
	b, err := appendPyJSON(nil, meta, 2, 0)
	if err != nil {
		return nil, fmt.Errorf("workload %s: metadata: %w", cfg.Name, err)
	}
	return append(b, '\n'), nil
}

// Paths are the two files of a workload in an output folder.
type Paths struct {
	Data     string // <dir>/<name>.jsonl
	Metadata string // <dir>/<name>.metadata.json
}

// PathsIn returns where the files of cfg live in dir.
func PathsIn(dir string, cfg *Config) Paths {
	return Paths{
		Data:     filepath.Join(dir, cfg.Name+".jsonl"),
		Metadata: filepath.Join(dir, cfg.Name+".metadata.json"),
	}
}

// Write generates the workload and writes its prompt file and sidecar into
// dir (created if needed). It returns the files' paths and the SHA-256 of
// the prompt file.
func Write(dir string, cfg *Config, tok llm.Tokenizer) (Paths, string, error) {
	rows, err := Generate(cfg, tok)
	if err != nil {
		return Paths{}, "", err
	}
	data := MarshalRows(rows)
	digest := SHA256(data)
	meta, err := MarshalMetadata(cfg, digest)
	if err != nil {
		return Paths{}, "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Paths{}, "", fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	p := PathsIn(dir, cfg)
	if err := writeFileAtomic(p.Data, data); err != nil {
		return Paths{}, "", fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	if err := writeFileAtomic(p.Metadata, meta); err != nil {
		return Paths{}, "", fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	return p, digest, nil
}

// writeFileAtomic writes through a temporary file and a rename, so an
// interrupted run never leaves a half-written prompt file that a later
// verify would have to explain.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
