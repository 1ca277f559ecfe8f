package analysis

// Checkpoint identifies by content the model files an embedded target
// loaded. A config names a model by path or Hugging Face id, and the files
// behind a name can change between invocations (a new `hf download` moves
// refs/main, a folder is rewritten), so the manifest records what was
// read, and a resumed sweep that finds other files refuses to mix them.
//
// Files are compared by name and content only: where they were read
// (Dir, Tokenizer.Dir) is recorded for the reader and never compared, so
// the same files in a moved folder or hub cache resume.
//
// The runner makes it (sweep.NewCheckpoint) and compares it on resume; it
// is declared here, below the runner, because summary.json ([Combined])
// carries it and report.md describes it.
type Checkpoint struct {
	// Dir is the folder the files were read from.
	Dir string `json:"dir"`
	// HubID and Revision name the Hugging Face repository and the
	// snapshot's commit when Dir is in the local hub cache.
	HubID    string `json:"hub_id,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Tokenizer is the folder the tokenizer's files were read from when
	// not Dir (--tokenizer naming another folder or hub id); nil when they
	// were in Dir, or there were none.
	Tokenizer *CheckpointOrigin `json:"tokenizer,omitempty"`
	// Files are the files read: the model's (config.json,
	// generation_config.json, the weights and their index), then the
	// tokenizer's (tokenizer.json, or vocab.json and merges.txt, and the
	// configs beside them).
	Files []CheckpointFile `json:"files"`
}

// CheckpointOrigin is where some of a Checkpoint's files were read.
type CheckpointOrigin struct {
	Dir string `json:"dir"`
	// HubID and Revision name the Hugging Face repository and the
	// snapshot's commit when Dir is in a hub cache.
	HubID    string `json:"hub_id,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// CheckpointFile is one file of a Checkpoint.
type CheckpointFile struct {
	// Name is the file's path relative to Checkpoint.Dir, or for a
	// tokenizer file outside it TokenizerPrefix and its path relative to
	// Checkpoint.Tokenizer.Dir ("tokenizer/tokenizer.json"). Manifests
	// written before tinyserve recorded Tokenizer name those files by
	// their absolute path; the runner compares them as if named the new
	// way.
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// TokenizerPrefix begins the names of the tokenizer's files that were not
// in the model's folder: "tokenizer/" and their path relative to the
// tokenizer's folder. A name rather than the path: a hub cache moves
// (another HF_HOME, another machine), a tokenizer folder named by a
// relative path moves with the working directory, and the same bytes
// there measure the same model. The prefix keeps them apart from the model's files of the
// same name (both folders may have a tokenizer_config.json) and says in
// manifest.json and report.md what they are.
const TokenizerPrefix = "tokenizer/"
