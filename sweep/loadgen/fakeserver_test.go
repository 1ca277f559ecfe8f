package loadgen

import (
	"fmt"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fakeopenai"
)

// fakeServer is the fake OpenAI-compatible server both the load generator's
// tests and the sweep's run against (one copy, in internal/fakeopenai).
type fakeServer = fakeopenai.Server

// newFakeServer starts f for the test.
func newFakeServer(t *testing.T, f *fakeServer) *fakeServer { return fakeopenai.Start(t, f) }

// testRows makes n prompt rows asking for tokens tokens each.
func testRows(n, tokens int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		pt, ot := 10, tokens
		rows[i] = Row{Bucket: "short", ID: fmt.Sprintf("w_%06d", i), Prompt: fmt.Sprintf("prompt %d", i),
			PromptTokens: &pt, TargetPromptTokens: &pt, TargetOutputTokens: &ot, Workload: "w"}
	}
	return rows
}
