// Command podbin is the only program skewtest's pods run, so that no image
// has to be pulled from a registry:
//
//	podbin pause            the sandbox (pause) container: sleep until signalled
//	podbin workload PATH... for each PATH: a directory gets PATH/marker once
//	                        (kept if it exists); anything else (a raw block
//	                        device, volumeMode Block) gets the marker in its
//	                        first sector, after RawMagic, once; each is
//	                        printed; then sleep until signalled
//
// The marker lets the harness check that a re-created pod sees the data its
// predecessor wrote before the kubelet swap.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
		fmt.Fprintln(os.Stderr, "usage: podbin pause | podbin workload PATH...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
	case "workload":
		if len(os.Args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: podbin workload PATH...")
			os.Exit(2)
		}
		for _, p := range os.Args[2:] {
			if err := writeMarker(p); err != nil {
				fmt.Fprintln(os.Stderr, "podbin:", err)
				os.Exit(1)
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "podbin: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	<-sig
}

// RawMagic starts the marker podbin writes at offset 0 of a raw device; a
// NUL ends it. The harness reads it back from the node.
const RawMagic = "skewtest-marker:"

// rawMarkerSize is how much of a raw device the marker may take: one
// sector.
const rawMarkerSize = 512

func markerContent() string {
	return fmt.Sprintf("written by pod %s uid %s at %s", os.Getenv("POD_NAME"), os.Getenv("POD_UID"), time.Now().UTC().Format(time.RFC3339))
}

func writeMarker(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return writeRawMarker(p)
	}
	path := filepath.Join(p, "marker")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		fmt.Printf("marker found: %s\n", b)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	content := markerContent()
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

// writeRawMarker keeps or writes the marker in the first sector of a raw
// device (or file): RawMagic, the content, a NUL; synced, so that it is on
// the device before the pod is deleted.
func writeRawMarker(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, rawMarkerSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if rest, ok := bytes.CutPrefix(buf[:n], []byte(RawMagic)); ok {
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			fmt.Printf("marker found in %s: %s\n", path, rest[:i])
			return nil
		}
	}
	content := markerContent()
	out := make([]byte, rawMarkerSize)
	copy(out, RawMagic+content)
	if _, err := f.WriteAt(out, 0); err != nil {
		return fmt.Errorf("write the marker to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	fmt.Printf("marker written to %s: %s\n", path, content)
	return nil
}
