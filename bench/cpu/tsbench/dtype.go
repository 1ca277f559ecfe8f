//go:build !before

package main

import "github.com/tinyserve/tinyserve/llm/gpt2"

// withDType sets the backend's weight storage type. compare.sh builds
// older revisions, whose CPUOptions may lack the field, with the "before"
// tag instead (dtype_before.go).
func withDType(o *gpt2.CPUOptions, dtype string) error {
	o.WeightDType = dtype
	return nil
}
