package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// reachTimeout bounds CheckReachable's request.
const reachTimeout = 30 * time.Second

// CheckReachable sends one GET to base/v1/models. Any HTTP answer, an error
// status included (a server without the route, a wrong key), shows the
// server is up; only a failure to get an answer is an error, wrapping
// [ErrUnreachable].
func CheckReachable(ctx context.Context, client *http.Client, base, apiKey string) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s did not answer (%v); nothing was measured", ErrUnreachable, base, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Body.Close()
}

// ErrUnreachable marks a condition or a sweep whose server did not answer
// HTTP at all (connection refused, no route, a timeout) before the first
// request; nothing was sent or kept.
var ErrUnreachable = errors.New("server not reachable")
