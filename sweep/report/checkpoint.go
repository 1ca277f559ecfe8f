package report

import (
	"fmt"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/analysis"
)

// describeCheckpoint is c in one line of Markdown: where it came from
// (the model's folder or hub id, then the tokenizer's when elsewhere) and
// its files' digests (shortened; manifest.json has them whole).
func describeCheckpoint(c *analysis.Checkpoint) string {
	var b strings.Builder
	b.WriteString(describeOrigin(c.Dir, c.HubID, c.Revision))
	if t := c.Tokenizer; t != nil {
		fmt.Fprintf(&b, ", the %s files from %s", mdCode(analysis.TokenizerPrefix), describeOrigin(t.Dir, t.HubID, t.Revision))
	}
	b.WriteString(" (")
	for i, f := range c.Files {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s SHA-256 %s…", mdCode(f.Name), f.SHA256[:min(len(f.SHA256), 16)])
	}
	b.WriteString(")")
	return b.String()
}

// describeOrigin is a folder in Markdown: its hub id and commit when it is
// a hub cache's snapshot, else its path.
func describeOrigin(dir, hubID, revision string) string {
	if hubID != "" {
		return fmt.Sprintf("%s at commit %s", mdCode(hubID), mdCode(revision))
	}
	return mdCode(dir)
}
