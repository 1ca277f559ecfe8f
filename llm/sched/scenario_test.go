package sched

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

var update = flag.Bool("update", false, "rewrite the scenario golden files")

// TestScenarios runs every testdata/scenarios/*.txt script and compares its
// trace with the .golden file beside it; -update rewrites the goldens, which
// are then reviewed as a diff. Commands:
//
//	config seqs=N budget=N blocks=N blocksize=N [prefix=1]
//	add NAME prompt=N max=N [unique=K] [uncached=1]
//
// Prompts are all token 0, so they share every prefix, except from
// position unique=K on, where each sequence's tokens are its own; prefix=1
// turns on prefix caching, and uncached=1 adds with AddUncached.
//
//	abort NAME
//	step [finish=NAME,NAME]   schedule, "run", sample, update
//	run                       step until nothing is left (at most 1000 steps)
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			got := runScenario(t, f)
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("trace differs from %s (run with -update and review the diff)\n--- got ---\n%s", golden, got)
			}
		})
	}
}

type scenario struct {
	t     *testing.T
	s     *Scheduler
	kv    *kv.Manager
	ids   map[string]kv.SeqID
	names map[kv.SeqID]string
	out   strings.Builder
	steps int
}

func runScenario(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := &scenario{t: t, ids: map[string]kv.SeqID{}, names: map[kv.SeqID]string{}}
	sc.configure(map[string]int{})
	in := bufio.NewScanner(f)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			sc.out.WriteString(line + "\n")
			continue
		}
		sc.out.WriteString("> " + line + "\n")
		fields := strings.Fields(line)
		args := map[string]string{}
		for _, kvp := range fields[1:] {
			if k, v, ok := strings.Cut(kvp, "="); ok {
				args[k] = v
			}
		}
		switch fields[0] {
		case "config":
			sc.configure(ints(t, args))
		case "add":
			a := ints(t, args)
			id := kv.SeqID(len(sc.ids) + 1)
			sc.ids[fields[1]] = id
			sc.names[id] = fields[1]
			prompt := make([]int, a["prompt"])
			if u, ok := a["unique"]; ok {
				for i := u; i < len(prompt); i++ {
					prompt[i] = int(id)
				}
			}
			add := sc.s.Add
			if a["uncached"] == 1 {
				add = sc.s.AddUncached
			}
			if err := add(id, prompt, a["max"]); err != nil {
				fmt.Fprintf(&sc.out, "error: %v\n", err)
			}
		case "abort":
			if err := sc.s.Abort(sc.ids[fields[1]]); err != nil {
				fmt.Fprintf(&sc.out, "error: %v\n", err)
			}
		case "step":
			sc.step(args["finish"])
		case "run":
			for i := 0; i < 1000 && sc.s.NumRunning()+sc.s.NumWaiting() > 0; i++ {
				sc.step("")
			}
		default:
			t.Fatalf("%s: unknown command %q", path, fields[0])
		}
		if err := sc.kv.Check(); err != nil {
			t.Fatalf("after %q: %v", line, err)
		}
	}
	return sc.out.String()
}

func ints(t *testing.T, args map[string]string) map[string]int {
	m := map[string]int{}
	for k, v := range args {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%s: %v", k, v, err)
		}
		m[k] = n
	}
	return m
}

func (sc *scenario) configure(a map[string]int) {
	var opts []kv.Option
	if a["prefix"] == 1 {
		opts = append(opts, kv.WithPrefixCaching())
	}
	m, err := kv.New(a["blocks"]+boolInt(a["blocks"] == 0)*64, a["blocksize"], opts...)
	if err != nil {
		sc.t.Fatal(err)
	}
	s, err := New(Config{MaxNumSeqs: a["seqs"], MaxNumBatchedTokens: a["budget"]}, m)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.s, sc.kv = s, m
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (sc *scenario) list(ids []kv.SeqID) string {
	var names []string
	for _, id := range ids {
		names = append(names, sc.names[id])
	}
	return "[" + strings.Join(names, " ") + "]"
}

func (sc *scenario) step(finish string) {
	sc.steps++
	out := sc.s.Schedule()
	fmt.Fprintf(&sc.out, "step %d: %d tokens\n", sc.steps, out.NumTokens)
	var sampled []Sampled
	for _, x := range out.Scheduled {
		fmt.Fprintf(&sc.out, "  %s pos=%d n=%d blocks=%v", sc.names[x.ID], x.StartPos, len(x.Tokens), x.BlockTable)
		if x.Sample {
			sc.out.WriteString(" sample")
			done := false
			for _, n := range strings.Split(finish, ",") {
				done = done || sc.names[x.ID] == n
			}
			sampled = append(sampled, Sampled{ID: x.ID, Token: 1000 + x.NumGenerated, Finished: done})
		}
		if x.First {
			sc.out.WriteString(" first")
		}
		sc.out.WriteString("\n")
	}
	if len(out.Preempted) > 0 {
		fmt.Fprintf(&sc.out, "  preempted %s\n", sc.list(out.Preempted))
	}
	if len(out.Dropped) > 0 {
		fmt.Fprintf(&sc.out, "  dropped %s\n", sc.list(out.Dropped))
	}
	finished, err := sc.s.Update(sampled)
	if err != nil {
		fmt.Fprintf(&sc.out, "  update error: %v\n", err)
	}
	if len(finished) > 0 {
		fmt.Fprintf(&sc.out, "  finished %s\n", sc.list(finished))
	}
	var waiting, running []kv.SeqID
	for _, q := range sc.s.waiting {
		waiting = append(waiting, q.id)
	}
	for _, q := range sc.s.running {
		running = append(running, q.id)
	}
	fmt.Fprintf(&sc.out, "  running %s waiting %s kv %d/%d", sc.list(running), sc.list(waiting), sc.kv.NumUsed(), sc.kv.NumBlocks())
	if sc.kv.PrefixCaching() {
		fmt.Fprintf(&sc.out, " cached %d", sc.kv.NumCachedBlocks())
	}
	sc.out.WriteString("\n")
}
