package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/analysis"
)

// WriteVerdict writes c's verdict for a terminal: the candidate saturation
// concurrency and, when some level's repeats disagree by more than the rule
// can resolve, a warning that says so: the report has the details, but a
// reader of the terminal alone would otherwise take a verdict made of noise
// at its word.
func WriteVerdict(w io.Writer, c *analysis.Combined) {
	if s := c.Saturation.Candidate; s != nil {
		fmt.Fprintf(w, "candidate saturation concurrency: %d (client-observed)\n", *s)
	} else {
		fmt.Fprintln(w, "candidate saturation concurrency: not demonstrated")
	}
	noisy := noisyLevels(c.ByConcurrency, c.Saturation.ThroughputGainThreshold)
	if len(noisy) == 0 {
		return
	}
	levels := make([]string, len(noisy))
	widest := 0.0
	for i, n := range noisy {
		levels[i] = strconv.Itoa(n.Concurrency)
		widest = max(widest, n.Spread)
	}
	fmt.Fprintf(w, "warning: repeats disagree at concurrency %s (up to %.0f%% of the median apart, against the rule's %.0f%% gain): the verdict may be noise; see the report\n",
		strings.Join(levels, ", "), widest*100, c.Saturation.ThroughputGainThreshold*100)
}
