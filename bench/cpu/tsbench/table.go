package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// issueFloor is the floor issue 8 gives for its reference machine (2 cores
// of AMD Zen 5, about 40 GB/s and 410 GFLOP/s fp32): weights over bandwidth
// for decode, FLOPs over peak for prefill. It is a yardstick, not this
// machine's floor.
var issueFloor = map[string]float64{
	"decode-b1": 12.5, "decode-b8": 14.3, "prefill-128": 54, "prefill-512": 300,
}

// tableOptions are how printTable lays out the table.
type tableOptions struct {
	// Yardstick are per-case reference times (issueFloor for the GPT-2
	// shape of issue 8) shown as base over them; nil leaves the column out.
	Yardstick map[string]float64
	// Markdown prints a Markdown table instead of aligned columns.
	Markdown bool
}

// printTable reads JSON results (one object per line; other lines, and
// objects that are not a case's result, such as the peers' configuration
// and check lines, are skipped) and prints one row per case: each engine's
// time in ms and, for every engine but base, its time over base's (above
// 1: base is faster). A case run several times by an engine counts with
// its best median.
func printTable(w io.Writer, path, base string, opts tableOptions) error {
	ms := map[string]map[string]float64{} // case -> engine -> ms
	floor := map[string]float64{}         // case -> base engine's floor_ms
	var cases, engines []string
	seen := map[string]int{} // engine and case -> results read
	runs := 0
	err := eachObject(path, func(line []byte) error {
		var r result
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.Case == "" || r.Engine == "" || r.MS <= 0 {
			return nil // a configuration or check line
		}
		if ms[r.Case] == nil {
			ms[r.Case] = map[string]float64{}
			cases = append(cases, r.Case)
		}
		if !slices.Contains(engines, r.Engine) {
			engines = append(engines, r.Engine)
		}
		// Several runs of the same case (compare.sh RUNS=n) keep the best
		// median, and the strictest floor (the highest bandwidth measured):
		// on a shared machine the slower runs measure the neighbours.
		if old, ok := ms[r.Case][r.Engine]; !ok || r.MS < old {
			ms[r.Case][r.Engine] = r.MS
		}
		seen[r.Engine+"\x00"+r.Case]++
		runs = max(runs, seen[r.Engine+"\x00"+r.Case])
		if r.Engine == base && r.FloorMS > 0 && (floor[r.Case] == 0 || r.FloorMS < floor[r.Case]) {
			floor[r.Case] = r.FloorMS
		}
		return nil
	})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells []string) {
		if opts.Markdown {
			fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		} else {
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	head := []string{"case"}
	for _, e := range engines {
		head = append(head, e+" ms")
	}
	for _, e := range engines {
		if e != base {
			head = append(head, e+"/"+base)
		}
	}
	head = append(head, "floor here ms", base+"/floor here")
	if opts.Yardstick != nil {
		head = append(head, base+"/issue floor")
	}
	row(head)
	if opts.Markdown {
		sep := make([]string, len(head))
		for i := range sep {
			sep[i] = "---"
		}
		row(sep)
	}
	for _, c := range cases {
		cells := []string{c}
		for _, e := range engines {
			cells = append(cells, fmtMS(ms[c][e]))
		}
		b := ms[c][base]
		for _, e := range engines {
			if e != base {
				cells = append(cells, ratio(ms[c][e], b))
			}
		}
		cells = append(cells, fmtMS(floor[c]), ratio(b, floor[c]))
		if opts.Yardstick != nil {
			cells = append(cells, ratio(b, opts.Yardstick[c]))
		}
		row(cells)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if runs > 1 {
		fmt.Fprintf(w, "(up to %d runs per engine and case: each cell is the best of its runs' medians)\n", runs)
	}
	return nil
}

func fmtMS(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// eachObject calls fn with each line of the file at path that holds a JSON
// object (other lines, such as compare.sh's notes, are skipped); an error
// from fn or the read names the file.
func eachObject(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24) // a peer's configuration line can be long
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
