package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

// healthCommand is `tinyserve-serve health`: a container HEALTHCHECK
// without curl.
func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "exit 0 when the server on --host/--port answers GET /health with 200 (a container HEALTHCHECK without curl)",
		// Its own --host and --port, so that they may also follow the
		// command name (health --port 8001); without them there, the
		// server's flags (before the name, or from the environment)
		// apply.
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "host", Usage: "the server's --host"},
			&cli.IntFlag{Name: "port", Usage: "the server's --port"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("health: unexpected arguments %q", c.Args().Slice())
			}
			app := c.Lineage()[1]
			host, port := app.String("host"), app.Int("port")
			if c.IsSet("host") {
				host = c.String("host")
			}
			if c.IsSet("port") {
				port = c.Int("port")
			}
			return checkHealth(c.Context, host, port)
		},
	}
}

// checkHealth asks a running server for GET /health. A wildcard listen
// address is probed on loopback.
func checkHealth(ctx context.Context, host string, port int) error {
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}
