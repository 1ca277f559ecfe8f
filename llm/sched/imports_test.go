package sched

import (
	"testing"

	"github.com/tinyserve/tinyserve/internal/puretest"
)

// TestPureImports keeps the package a pure state machine: no clocks,
// goroutine plumbing, I/O or logging may creep into its non-test files.
func TestPureImports(t *testing.T) { puretest.Check(t, ".") }
