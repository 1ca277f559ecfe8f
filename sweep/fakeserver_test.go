package sweep

import (
	"fmt"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fakeopenai"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// fakeServer is the fake OpenAI-compatible server both the load generator's
// tests and the sweep's run against (one copy, in internal/fakeopenai).
type fakeServer = fakeopenai.Server

// newFakeServer starts f for the test.
func newFakeServer(t *testing.T, f *fakeServer) *fakeServer { return fakeopenai.Start(t, f) }

// testRows makes n prompt rows asking for tokens tokens each.
func testRows(n, tokens int) []loadgen.Row {
	rows := make([]loadgen.Row, n)
	for i := range rows {
		pt, ot := 10, tokens
		rows[i] = loadgen.Row{Bucket: "short", ID: fmt.Sprintf("w_%06d", i), Prompt: fmt.Sprintf("prompt %d", i),
			PromptTokens: &pt, TargetPromptTokens: &pt, TargetOutputTokens: &ot, Workload: "w"}
	}
	return rows
}
