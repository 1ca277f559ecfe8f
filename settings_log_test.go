package tinyserve

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
)

// TestDerivedSettingsLogged: what Open chooses for a setting left at zero
// (threads, the KV budget, the context length) is logged with its value
// and its source, and a value given is logged as given.
func TestDerivedSettingsLogged(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{}, []string{`threads_from="GOMAXPROCS`, "kv_cache_bytes=134217728", `kv_cache_bytes_from="the default: room for 64 sequences`,
			"max_model_len=1024", `from="the model's context length`}},
		{Config{Threads: 1, KVCacheBytes: 1 << 20, MaxModelLen: 512}, []string{"threads=1 threads_from=--threads", "kv_cache_bytes=1048576",
			"max_model_len=512 from=--max-model-len"}},
	} {
		var logs syncbuf.Buffer
		tc.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		e, err := Open(context.Background(), tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		for _, w := range tc.want {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("%+v: the log lacks %q:\n%s", tc.cfg, w, logs.String())
			}
		}
	}
}
