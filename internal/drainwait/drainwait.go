// Package drainwait holds a test helper shared by the shutdown tests of
// openai.Serve's callers (cmd/serve and examples/embed): after the engine has finished an
// answer that a slow client is still reading, shutting down must wait for
// the client instead of cutting the stream.
package drainwait

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// SlowClient returns a client whose connections have a fixed 256 KiB
// receive buffer (autotuning may grow one to tens of MB), so that a server
// writing a large answer to it blocks once its own send buffer is full, as
// it would for a slow reader.
func SlowClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				err = c.(*net.TCPConn).SetReadBuffer(256 << 10)
			}
			return c, err
		}}}
}

// RequireAnswerDelivered checks, once shutdown has been asked for, that the
// server (whose return value done delivers) keeps running while the client
// reads the rest of stream, that the stream ends with data: [DONE], and that
// the server then returns nil.
func RequireAnswerDelivered(t testing.TB, done <-chan error, stream io.Reader) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("the server returned (%v) while an accepted answer was still being written", err)
	case <-time.After(300 * time.Millisecond):
	}
	rest, err := io.ReadAll(stream)
	if err != nil {
		t.Fatalf("the stream was torn: %v", err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("the stream did not end with data: [DONE]; its last bytes: %q", rest[max(0, len(rest)-200):])
	}
	if err := <-done; err != nil {
		t.Fatalf("the server returned %v", err)
	}
}
