package deploy

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// baseFiles maps a final-stage FROM image to the list of the files it has
// that a binary may need at load time (testdata/*.files: loaders and shared
// libraries). "" is an image with no loader and no shared library at all.
// A base that is not here fails TestBaseHasLoadDeps: changing the FROM line
// needs a list for the new base.
var baseFiles = map[string]string{
	"gcr.io/distroless/base-debian12:nonroot": "testdata/distroless-base-debian12.files",
	// distroless/static is base-files, netbase, tzdata, media-types and
	// CA certificates: no libc, no loader.
	"gcr.io/distroless/static-debian12:nonroot": "",
}

// loadDeps is what the kernel and the dynamic loader need to start an ELF
// executable besides the file itself.
type loadDeps struct {
	interp string   // PT_INTERP, "" for none
	needed []string // DT_NEEDED
}

func (d loadDeps) static() bool { return d.interp == "" && len(d.needed) == 0 }

func (d loadDeps) String() string {
	if d.static() {
		return "static"
	}
	return fmt.Sprintf("interpreter %q, DT_NEEDED %q", d.interp, d.needed)
}

// readLoadDeps reads the interpreter and the DT_NEEDED libraries of the ELF
// file at path.
func readLoadDeps(path string) (loadDeps, error) {
	f, err := elf.Open(path)
	if err != nil {
		return loadDeps{}, err
	}
	defer f.Close()
	var d loadDeps
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return loadDeps{}, fmt.Errorf("%s: PT_INTERP: %w", path, err)
		}
		d.interp = strings.TrimRight(string(b), "\x00")
	}
	// DynString returns nothing, without an error, when there is no dynamic
	// section.
	if d.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return loadDeps{}, fmt.Errorf("%s: DT_NEEDED: %w", path, err)
	}
	return d, nil
}

// missing lists what of d the files (absolute paths) do not provide: the
// interpreter, matched by its full path (the kernel opens exactly that
// file), and each DT_NEEDED library, matched by file name (the loader
// searches its folders for it).
func (d loadDeps) missing(files []string) []string {
	paths := map[string]bool{}
	names := map[string]bool{}
	for _, f := range files {
		paths[f] = true
		names[filepath.Base(f)] = true
	}
	var out []string
	if d.interp != "" && !paths[d.interp] {
		out = append(out, "interpreter "+d.interp)
	}
	for _, n := range d.needed {
		if !names[n] {
			out = append(out, n)
		}
	}
	return out
}

// readFileList reads a testdata/*.files list: one absolute path a line,
// blank lines and # comments ignored.
func readFileList(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			return nil, fmt.Errorf("%s:%d: %q is not an absolute path", path, i+1, line)
		}
		files = append(files, line)
	}
	return files, nil
}

// checkBase says whether a binary with deps can start on image: a static
// binary on any base, a dynamic one where the image's file list has its
// interpreter and libraries.
func checkBase(image string, deps loadDeps) error {
	if deps.static() {
		return nil
	}
	list, ok := baseFiles[image]
	if !ok {
		return fmt.Errorf("no file list for base image %s (add one under testdata/ and to baseFiles); the binary needs %v", image, deps)
	}
	var files []string
	if list != "" {
		var err error
		if files, err = readFileList(list); err != nil {
			return err
		}
	}
	if m := deps.missing(files); len(m) > 0 {
		return fmt.Errorf("base image %s lacks %s, which the binary needs (%v)", image, strings.Join(m, ", "), deps)
	}
	return nil
}

// shellWords splits a RUN line the way sh would for the plain words a build
// line uses: blanks separate words, quotes group, backslash escapes.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteRune(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.ContainsRune(`"\$`+"`", rune(s[i+1])):
				i++
				w.WriteByte(s[i])
			default:
				w.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune(";&|<>$`()", c):
			return nil, fmt.Errorf("%q: only a plain command is understood, not %q", s, c)
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated quote", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// buildCommand turns the Dockerfile's build RUN line into the environment
// assignments before the command and the command's arguments, with the -o
// output replaced by out.
func buildCommand(run, out string) (env, args []string, err error) {
	words, err := shellWords(run)
	if err != nil {
		return nil, nil, err
	}
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		env = append(env, words[0])
		words = words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "build" {
		return nil, nil, fmt.Errorf("%q is not a go build command", run)
	}
	args = append([]string(nil), words[1:]...)
	replaced := false
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-o" && i+1 < len(args):
			args[i+1] = out
			replaced = true
			i++
		case strings.HasPrefix(args[i], "-o="):
			args[i] = "-o=" + out
			replaced = true
		}
	}
	if !replaced {
		return nil, nil, fmt.Errorf("%q has no -o", run)
	}
	return env, args, nil
}

var (
	buildMu   sync.Mutex
	buildDir  string            // made on first use, removed by TestMain
	buildBins map[string]string // GOOS/GOARCH -> binary
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildAsDockerfile builds the binary with the Dockerfile's own RUN line,
// from the repository root (the build stage's WORKDIR holds the whole
// tree), for goos/goarch (the image's is linux); each is built once per
// test process.
func buildAsDockerfile(t *testing.T, df *dockerfile, goos, goarch string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := goos + "/" + goarch
	if bin, ok := buildBins[key]; ok {
		return bin
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "tinyserve-deploy-")
		require.NoError(t, err)
		buildDir, buildBins = dir, map[string]string{}
	}
	bin := filepath.Join(buildDir, "tinyserve-serve-"+goos+"-"+goarch)
	env, args, err := buildCommand(df.buildRun, bin)
	require.NoError(t, err)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", strings.Join(env, " "), strings.Join(cmd.Args, " "), out)
	buildBins[key] = bin
	return bin
}

func TestBuildCommand(t *testing.T) {
	env, args, err := buildCommand(`CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/tinyserve-serve ./cmd/serve`, "/tmp/x")
	require.NoError(t, err)
	assert.Equal(t, []string{"CGO_ENABLED=0"}, env)
	assert.Equal(t, []string{"build", "-trimpath", "-ldflags=-s -w", "-o", "/tmp/x", "./cmd/serve"}, args)

	_, _, err = buildCommand(`go build ./cmd/serve`, "/tmp/x")
	assert.Error(t, err, "no -o")
	_, _, err = buildCommand(`go build -o x ./cmd/serve && strip x`, "/tmp/x")
	assert.Error(t, err, "not a plain command")
}

// TestCheckBase checks the checker without building anything: a dynamic
// binary (this one's interpreter and libraries on amd64) is rejected on
// distroless/static, which has no loader or libc, and on a base without a
// list, and accepted on base-debian12; a static binary is accepted anywhere.
func TestCheckBase(t *testing.T) {
	const static, base = "gcr.io/distroless/static-debian12:nonroot", "gcr.io/distroless/base-debian12:nonroot"
	dyn := loadDeps{interp: "/lib64/ld-linux-x86-64.so.2", needed: []string{"libdl.so.2", "libpthread.so.0", "libc.so.6"}}

	assert.Equal(t, []string{"interpreter /lib64/ld-linux-x86-64.so.2", "libdl.so.2", "libpthread.so.0", "libc.so.6"},
		dyn.missing(nil), "an empty list has nothing")
	err := checkBase(static, dyn)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lacks interpreter /lib64/ld-linux-x86-64.so.2, libdl.so.2")
	assert.ErrorContains(t, checkBase("gcr.io/distroless/cc-debian12:nonroot", dyn), "no file list")
	assert.NoError(t, checkBase(base, dyn))

	assert.NoError(t, checkBase(static, loadDeps{}), "a static binary needs nothing")
	assert.NoError(t, checkBase("scratch", loadDeps{}))

	// The interpreter is matched by full path, libraries by file name.
	files := []string{"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"}
	assert.Equal(t, []string{"interpreter /lib64/ld-linux-x86-64.so.2", "libdl.so.2", "libpthread.so.0"}, dyn.missing(files))
	assert.Equal(t, []string{"libssl.so.3"}, loadDeps{needed: []string{"libc.so.6", "libssl.so.3"}}.missing(files))

	for image, list := range baseFiles {
		if list == "" {
			continue
		}
		files, err := readFileList(list)
		require.NoError(t, err, image)
		assert.NotEmpty(t, files, image)
	}
}

// TestBaseHasLoadDeps builds the binary as the Dockerfile does, for amd64
// and arm64 (the architectures a build of the image may target), and checks
// that the final stage's base has the ELF interpreter and every DT_NEEDED
// library it names.
func TestBaseHasLoadDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	df := loadDockerfile(t)
	require.NotEmpty(t, df.base)
	_, ok := baseFiles[df.base]
	require.True(t, ok, "the Dockerfile's base %s has no file list in baseFiles", df.base)
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			bin := buildAsDockerfile(t, df, "linux", goarch)
			f, err := elf.Open(bin)
			require.NoError(t, err)
			assert.Equal(t, machines[goarch], f.Machine)
			f.Close()
			deps, err := readLoadDeps(bin)
			require.NoError(t, err)
			t.Logf("%s/%s: %v", "linux", goarch, deps)
			assert.NoError(t, checkBase(df.base, deps))
		})
	}
}
