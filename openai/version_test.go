package openai

import (
	"encoding/json"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionRoute(t *testing.T) {
	rec := serve(t, NewHandler(newFake(), WithAPIKeys("k")), "GET", "/version", "")
	require.Equal(t, 200, rec.Code, rec.Body.String()) // open, as vLLM's: outside /v1/
	var body map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	assert.Equal(t, map[string]string{"version": Version()}, body)
	assert.NotEmpty(t, body["version"])
}

func TestModuleVersion(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"main module, stamped", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261203084950-fb5434a1b2c3"}}, "v0.0.0-20261203084950-fb5434a1b2c3"},
		{"main module, go run", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
		{"dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"}, Deps: []*debug.Module{
			{Path: "golang.org/x/sys", Version: "v0.1.0"}, {Path: modulePath, Version: "v1.2.3"}}}, "v1.2.3"},
		{"replaced dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"}, Deps: []*debug.Module{
			{Path: modulePath, Version: "v1.2.3", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.2.4"}}}}, "v1.2.4"},
		{"replaced by a folder", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"}, Deps: []*debug.Module{
			{Path: modulePath, Version: "v1.2.3", Replace: &debug.Module{Path: "../tinyserve"}}}}, "(devel)"},
		{"absent", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"}}, "(devel)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, moduleVersion(&tc.bi))
		})
	}
}
