package workload

import (
	"fmt"
	"io"
)

// WriteAIPerf writes rows as an AIPerf single_turn custom dataset: one JSON
// object per line with the prompt as "text" and the target output length as
// "output_length", in file order, so the same prompts can be replayed with
// `aiperf profile --input-file F --custom-dataset-type single_turn`.
func WriteAIPerf(w io.Writer, rows []Row) error {
	var b []byte
	for _, r := range rows {
		b = append(b[:0], `{"text":`...)
		b = appendPyString(b, r.Prompt)
		b = fmt.Appendf(b, `,"output_length":%d}`+"\n", r.TargetOutputTokens)
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("aiperf export: %w", err)
		}
	}
	return nil
}
