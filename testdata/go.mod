// Package-less module that keeps the test fixtures (checkpoints, tokenizers,
// goldens: tens of MB) out of the tinyserve module that `go get` downloads.
// Tests reach these files by relative path.
module github.com/tinyserve/tinyserve/testdata

go 1.26.0
