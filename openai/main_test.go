package openai

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// handler's forwarders, the fake engine's senders, servers and engines.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
