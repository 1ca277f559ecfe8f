package interop_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/llm/chat/reasoning"
	"github.com/tinyserve/tinyserve/llm/chat/toolcall"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/openai"
)

// TestOpenAINode runs openai-node.mjs, the checks with the official Node
// SDK, against the same in-process server as TestOpenAIGo, when Node.js and
// the npm package "openai" are installed; it installs nothing, and without
// them it skips, saying so. The package is looked for in the node_modules
// folder of $OPENAI_NODE_DIR, then of $SDK_DIR (run.sh's), in each folder
// of $NODE_PATH, and in Node's global folder (PREFIX/lib/node_modules).
// resilience.mjs starts servers of its own from the binary, so it runs
// only from run.sh.
func TestOpenAINode(t *testing.T) {
	node, modules := nodeSDK(t, "openai-node.mjs")
	s := startServer(t)
	// What run.sh says about its server's default flags, which startServer's
	// engine and handler have.
	runNode(t, node, modules, "openai-node.mjs", s.base, "INTEROP_API_KEY="+apiKey, "INTEROP_PREFIX_CACHING=1")
}

// TestOpenAINodeChat runs openai-node-chat.mjs, the Node SDK's chat checks
// (create, stream, the stream helper, tools, n and seed, logprobs, a typed
// error), against qwen3-tiny, whose folder carries Qwen3's chat template,
// served with the hermes and qwen3 parsers as cmd/serve's
// --tool-call-parser hermes --enable-auto-tool-choice --reasoning-parser
// qwen3 serves it. It skips as TestOpenAINode does.
func TestOpenAINodeChat(t *testing.T) {
	node, modules := nodeSDK(t, "openai-node-chat.mjs")
	eng, err := tinyserve.Open(context.Background(), tinyserve.Config{Model: "../../testdata/qwen3-tiny", Tokenizer: tokenizer.BuiltinQwen})
	if err != nil {
		t.Fatal(err)
	}
	hermes, _ := toolcall.New("hermes")
	qwen3, _ := reasoning.New("qwen3")
	srv := httptest.NewServer(openai.NewHandler(eng, openai.WithToolCallParser(hermes, true), openai.WithReasoningParser(qwen3)))
	t.Cleanup(func() {
		srv.Close()
		_ = eng.Close()
	})
	runNode(t, node, modules, "openai-node-chat.mjs", srv.URL)
}

// nodeSDK returns node and the node_modules folder holding the npm
// package openai, or skips the test, saying what did not run and why.
func nodeSDK(t *testing.T, script string) (node, modules string) {
	const how = "run examples/interop/run.sh, or install the npm package openai " +
		"(npm install --prefix DIR openai@6.49.0) and set OPENAI_NODE_DIR=DIR"
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("the Node SDK checks (%s) did not run: no node on PATH; %s", script, how)
	}
	modules = findOpenAINode(node)
	if modules == "" {
		t.Skipf("the Node SDK checks (%s) did not run: the npm package openai is not installed "+
			"(looked in $OPENAI_NODE_DIR, $SDK_DIR, $NODE_PATH and %s); %s", script, globalModules(node), how)
	}
	return node, modules
}

// runNode runs script against base with env added, and fails the test
// with the failed checks if it fails.
func runNode(t *testing.T, node, modules, script, base string, env ...string) {
	// The script imports "openai", which Node resolves from the script's
	// folder (an ES module ignores NODE_PATH), so it runs from a folder
	// beside a link to the package's node_modules, as run.sh copies it
	// into its SDK folder.
	work := t.TempDir()
	text, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, script), text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(work, script), base)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		// The failed checks first (each FAIL line and its detail), then the
		// whole output.
		var failed []string
		for i, l := range lines {
			if strings.HasPrefix(l, "FAIL") {
				failed = append(failed, lines[i:min(i+2, len(lines))]...)
			}
		}
		t.Fatalf("node %s (openai from %s): %v\n%s\n\nthe whole output:\n%s", script, modules, err, strings.Join(failed, "\n"), out)
	}
	t.Logf("%s: %s", lines[0], lines[len(lines)-1])
}

// findOpenAINode returns the first node_modules folder that holds the npm
// package openai, or "".
func findOpenAINode(node string) string {
	var dirs []string
	for _, v := range []string{"OPENAI_NODE_DIR", "SDK_DIR"} {
		if d := os.Getenv(v); d != "" {
			dirs = append(dirs, filepath.Join(d, "node_modules"))
		}
	}
	dirs = append(dirs, filepath.SplitList(os.Getenv("NODE_PATH"))...)
	dirs = append(dirs, globalModules(node))
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "openai", "package.json")); err == nil {
			if abs, err := filepath.Abs(d); err == nil {
				return abs
			}
		}
	}
	return ""
}

// globalModules is where npm install -g puts packages for this node:
// PREFIX/lib/node_modules, PREFIX being the folder above node's bin.
func globalModules(node string) string {
	if real, err := filepath.EvalSymlinks(node); err == nil {
		node = real
	}
	return filepath.Join(filepath.Dir(filepath.Dir(node)), "lib", "node_modules")
}
