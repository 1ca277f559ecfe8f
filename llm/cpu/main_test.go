package cpu

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// backend's worker pool and every engine must be closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
