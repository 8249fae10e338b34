// Command podbin is the only program skewtest's pods run, so that no image
// has to be pulled from a registry:
//
//	podbin pause            the sandbox (pause) container: sleep until signalled
//	podbin workload DIR     write DIR/marker once (keep it if it exists), print
//	                        it, then sleep until signalled
//
// The marker lets the harness check that a re-created pod sees the data its
// predecessor wrote before the kubelet swap.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	// Catch SIGTERM before doing anything: one that arrives while the
	// marker is written must still end the container cleanly (exit 0), not
	// kill it by signal.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: podbin pause | podbin workload DIR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
	case "workload":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: podbin workload DIR")
			os.Exit(2)
		}
		if err := writeMarker(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "podbin:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "podbin: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	<-sig
}

func writeMarker(dir string) error {
	path := filepath.Join(dir, "marker")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		fmt.Printf("marker found: %s\n", b)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	content := fmt.Sprintf("written by pod %s uid %s at %s", os.Getenv("POD_NAME"), os.Getenv("POD_UID"), time.Now().UTC().Format(time.RFC3339))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Printf("marker written: %s\n", content)
	return nil
}
