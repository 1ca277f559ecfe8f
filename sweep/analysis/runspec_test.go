package analysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunSpecPaths(t *testing.T) {
	r := RunSpec{Kind: KindWarmup, Index: 1, Concurrency: 4}
	assert.Equal(t, "/x/warmup-01/concurrency-004.jsonl", r.RawPath("/x"))
	assert.Equal(t, "/x/warmup-01/concurrency-004.summary.json", r.SummaryPath("/x"))
	assert.Equal(t, "warmup-01/concurrency-004", r.String())
}
