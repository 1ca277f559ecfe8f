package openai

import (
	"net/http"
	"runtime/debug"
	"sync"
)

// modulePath is tinyserve's module, whose version /version reports.
const modulePath = "github.com/tinyserve/tinyserve"

// Version is the tinyserve version built into this binary: the module's
// version when it is a dependency (v1.2.3 or a pseudo-version), the one the
// go command stamped from version control when tinyserve is the main module
// (a pseudo-version, "+dirty" for an uncommitted tree), or "(devel)" when
// neither is known (go run, go test).
var Version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return moduleVersion(bi)
})

// moduleVersion finds tinyserve in bi, as the main module or a dependency
// (following a replace directive to the code actually built).
func moduleVersion(bi *debug.BuildInfo) string {
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path != modulePath {
			continue
		}
		v = d.Version
		if d.Replace != nil {
			// A module replacement carries its own version; a folder's
			// code has none, whatever version was required.
			v = d.Replace.Version
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v
}

type versionBody struct {
	Version string `json:"version"`
}

// version answers vLLM's GET /version, so that a benchmark keeping its
// server's version as evidence gets tinyserve's.
func (h *handler) version(w http.ResponseWriter, r *http.Request) {
	h.writeJSON(w, r, http.StatusOK, versionBody{Version: Version()})
}
