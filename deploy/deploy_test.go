// Package deploy holds the container and Kubernetes files of tinyserve-serve.
// There is no Docker engine or cluster here, so these tests check what can be
// checked: the manifest parses and is consistent with itself and with the
// Dockerfile, the binary the Dockerfile builds needs only the ELF
// interpreter and libraries its base image has (elf_test.go), and it accepts
// the manifest's flags, passes the readiness probe and the HEALTHCHECK, and
// drains on SIGTERM with exit status 0.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
)

// The parts of the manifest the checks read.
type deployment struct {
	APIVersion string `yaml:"apiVersion"`
	Spec       struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
}

type service struct {
	APIVersion string `yaml:"apiVersion"`
	Spec       struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// loadManifest decodes kubernetes.yaml into its Deployment and Service.
func loadManifest(t *testing.T) (*deployment, *service) {
	t.Helper()
	data, err := os.ReadFile("kubernetes.yaml")
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var dep *deployment
	var svc *service
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var head struct {
			Kind string `yaml:"kind"`
		}
		require.NoError(t, doc.Decode(&head))
		switch head.Kind {
		case "Deployment":
			dep = new(deployment)
			require.NoError(t, doc.Decode(dep))
		case "Service":
			svc = new(service)
			require.NoError(t, doc.Decode(svc))
		default:
			t.Fatalf("unexpected kind %q", head.Kind)
		}
	}
	require.NotNil(t, dep, "a Deployment")
	require.NotNil(t, svc, "a Service")
	return dep, svc
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestManifest(t *testing.T) {
	dep, svc := loadManifest(t)
	df := loadDockerfile(t)
	assert.Equal(t, "apps/v1", dep.APIVersion)
	assert.Equal(t, "v1", svc.APIVersion)
	assert.GreaterOrEqual(t, dep.Spec.Replicas, 2, "replicas behind the Service")

	pod := dep.Spec.Template
	for k, v := range dep.Spec.Selector.MatchLabels {
		assert.Equal(t, v, pod.Metadata.Labels[k], "the Deployment selects its pods")
	}
	for k, v := range svc.Spec.Selector {
		assert.Equal(t, v, pod.Metadata.Labels[k], "the Service selects the pods")
	}
	assert.True(t, pod.Spec.SecurityContext.RunAsNonRoot)
	assert.Equal(t, df.uid, pod.Spec.SecurityContext.RunAsUser, "the Dockerfile's USER")
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]

	port, ok := flagValue(c.Args, "port")
	require.True(t, ok, "--port is set")
	require.Len(t, c.Ports, 1)
	assert.Equal(t, port, strconv.Itoa(c.Ports[0].ContainerPort))
	assert.Equal(t, df.expose, c.Ports[0].ContainerPort)
	host, _ := flagValue(c.Args, "host")
	assert.Equal(t, "0.0.0.0", host, "reachable from outside the pod")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, c.Ports[0].Name, svc.Spec.Ports[0].TargetPort)

	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/health", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, c.Ports[0].Name, c.ReadinessProbe.HTTPGet.Port)
	require.NotNil(t, c.LivenessProbe)

	drain, ok := flagValue(c.Args, "drain-timeout")
	require.True(t, ok, "--drain-timeout is set")
	d, err := time.ParseDuration(drain)
	require.NoError(t, err)
	require.NotNil(t, c.Lifecycle.PreStop.Sleep, "a preStop pause before the drain")
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	grace := time.Duration(pod.Spec.TerminationGracePeriodSeconds) * time.Second
	// After a drain that times out, cmd/serve gives handlers its
	// shutdownGrace (5 s) to write their errors before cutting connections.
	const shutdownGrace = 5 * time.Second
	assert.Greater(t, grace, preStop+d+shutdownGrace, "the grace period covers preStop, the drain and the shutdown grace")
	lp := c.LivenessProbe
	assert.Greater(t, time.Duration(lp.PeriodSeconds*lp.FailureThreshold)*time.Second, d,
		"a drain (503 on /health) must not trip the liveness probe")

	for _, e := range c.Env {
		assert.True(t, strings.HasPrefix(e.Name, "TINYSERVE_"), e.Name)
	}
}

// dockerfile is what the checks read from the Dockerfile.
type dockerfile struct {
	goVersion   string   // of the build stage's golang image
	base        string   // the final stage's FROM image
	buildRun    string   // the RUN line that builds the binary
	binary      string   // where the final stage puts it
	entrypoint  []string // ENTRYPOINT, exec form
	healthcheck []string // HEALTHCHECK CMD, exec form
	uid         int
	expose      int
	env         map[string]string
}

func loadDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	df := &dockerfile{env: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			for _, f := range strings.Fields(rest) {
				if !strings.HasPrefix(f, "--") { // --platform=...
					df.base = f
					break
				}
			}
			if v, ok := strings.CutPrefix(df.base, "golang:"); ok {
				df.goVersion = v
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				df.buildRun = rest
			}
		case "COPY":
			if f := strings.Fields(rest); strings.HasPrefix(f[0], "--from=") {
				df.binary = f[len(f)-1]
			}
		case "USER":
			uid, _, _ := strings.Cut(rest, ":")
			df.uid, err = strconv.Atoi(uid)
			require.NoError(t, err, "USER is numeric, so runAsNonRoot can verify it")
		case "EXPOSE":
			df.expose, err = strconv.Atoi(rest)
			require.NoError(t, err)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				df.env[k] = v
			}
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(rest), &df.entrypoint))
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(rest, "CMD ")
			require.True(t, ok)
			require.NoError(t, json.Unmarshal([]byte(cmd), &df.healthcheck))
		}
	}
	return df
}

func TestDockerfile(t *testing.T) {
	df := loadDockerfile(t)
	gomod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	require.NotNil(t, m)
	assert.Equal(t, string(m[1]), df.goVersion, "the build image has go.mod's Go")

	assert.Contains(t, df.buildRun, "CGO_ENABLED=0", "no cgo (purego loads the CUDA libraries; TestBaseHasLoadDeps checks the base has what the binary needs)")
	assert.True(t, strings.HasSuffix(df.buildRun, " ./cmd/serve"), df.buildRun)
	_, err = os.Stat("../cmd/serve/main.go")
	require.NoError(t, err)
	assert.Equal(t, "/usr/local/bin/tinyserve-serve", df.binary)
	assert.Equal(t, []string{df.binary}, df.entrypoint)
	assert.Equal(t, []string{df.binary, "health"}, df.healthcheck)
	assert.NotZero(t, df.uid, "non-root")
	assert.Equal(t, strconv.Itoa(df.expose), df.env["TINYSERVE_PORT"])
	assert.Equal(t, "0.0.0.0", df.env["TINYSERVE_HOST"])
}

// TestBinaryRunsManifest builds cmd/serve with the Dockerfile's RUN line and runs it
// with the manifest's arguments and the Dockerfile's environment (only the
// port moved to a free one): the readiness probe and the HEALTHCHECK pass,
// and SIGTERM drains and exits 0.
func TestBinaryRunsManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dep, _ := loadManifest(t)
	df := loadDockerfile(t)
	c := dep.Spec.Template.Spec.Containers[0]

	bin := buildAsDockerfile(t, df, runtime.GOOS, runtime.GOARCH)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, ln.Close())

	env := os.Environ()
	for k, v := range df.env {
		env = append(env, k+"="+v)
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env, "TINYSERVE_PORT="+port)
	var args []string
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--port=") && !strings.HasPrefix(a, "--host=") {
			args = append(args, a)
		}
	}
	args = append(args, "--host=127.0.0.1")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, args...)
	srv.Env = env
	var logs syncbuf.Buffer // written by exec's copying goroutine
	srv.Stderr = &logs
	require.NoError(t, srv.Start())
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()

	base := "http://127.0.0.1:" + port
	ready := false
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !ready; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the server exited: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + c.ReadinessProbe.HTTPGet.Path)
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	require.True(t, ready, "readiness probe never passed:\n%s", logs.String())

	hc := exec.CommandContext(ctx, bin, df.healthcheck[1:]...)
	hc.Env = env
	out, err := hc.CombinedOutput()
	require.NoError(t, err, "HEALTHCHECK: %s", out)

	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Hello","max_tokens":4}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status 0 after a drain:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", logs.String())
	}
	assert.Contains(t, logs.String(), `"msg":"stopped"`, "JSON logs, as --log-format asks")
}
