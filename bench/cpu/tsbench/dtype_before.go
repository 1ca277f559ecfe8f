//go:build before

package main

import (
	"errors"

	"github.com/tinyserve/tinyserve/llm/gpt2"
)

// withDType accepts only float32: revisions built with the "before" tag
// predate CPUOptions.WeightDType.
func withDType(_ *gpt2.CPUOptions, dtype string) error {
	if dtype == "" || dtype == "float32" {
		return nil
	}
	return errors.New("-dtype needs a revision with CPUOptions.WeightDType")
}
