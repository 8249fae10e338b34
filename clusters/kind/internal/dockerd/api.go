package dockerd

// This file is a small client of the daemon's Docker API over its unix socket.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// httpClient talks to the daemon's API over its unix socket.
func httpClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func apiDo(ctx context.Context, sock, method, path string, timeout time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	c := httpClient(sock)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// ping reports whether the daemon answers GET /_ping.
func ping(ctx context.Context, sock string) bool {
	if _, err := os.Stat(sock); err != nil {
		return false
	}
	return apiDo(ctx, sock, http.MethodGet, "/_ping", 2*time.Second, nil) == nil
}

// removeAll removes all containers (docker rm -f -v) and the networks
// that are not docker's own, so that dockerd tears down their bridges,
// rules and mounts itself.
func removeAll(ctx context.Context, sock string, log *slog.Logger) error {
	var errs []error
	var containers []struct {
		ID    string   `json:"Id"`
		Names []string `json:"Names"`
	}
	if err := apiDo(ctx, sock, http.MethodGet, "/containers/json?all=1", 30*time.Second, &containers); err != nil {
		return err
	}
	for _, c := range containers {
		log.Info("removing container", "id", c.ID[:min(12, len(c.ID))], "names", c.Names)
		if err := apiDo(ctx, sock, http.MethodDelete, "/containers/"+url.PathEscape(c.ID)+"?force=1&v=1", 2*time.Minute, nil); err != nil {
			errs = append(errs, err)
		}
	}
	var networks []struct {
		ID   string `json:"Id"`
		Name string `json:"Name"`
	}
	if err := apiDo(ctx, sock, http.MethodGet, "/networks", 30*time.Second, &networks); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, n := range networks {
		switch n.Name {
		case "bridge", "host", "none":
			continue
		}
		log.Info("removing network", "name", n.Name)
		if err := apiDo(ctx, sock, http.MethodDelete, "/networks/"+url.PathEscape(n.ID), time.Minute, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
