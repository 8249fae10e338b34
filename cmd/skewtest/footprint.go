package main

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// footprintCmd saves the host's footprint to a file (before CI's first
// test) or compares the host with a saved one (after its last), naming
// every difference: a leak of any run fails CI.
func footprintCmd(ctx context.Context, s streams, args []string) error {
	w := s.out
	if len(args) != 2 || (args[0] != "save" && args[0] != "compare") {
		return fmt.Errorf("%w: usage: skewtest footprint save FILE | compare FILE", exitcode.ErrInvalid)
	}
	file := args[1]
	if args[0] == "save" {
		f := footprint.Take(ctx)
		if err := footprint.Save(file, f); err != nil {
			return infrastructure(err)
		}
		fmt.Fprintf(w, "host footprint saved to %s: %d processes, %d mounts, %d loop devices, %d cgroups, %d iptables lines, %d links, %d sysctls, %d files\n",
			file, len(f.Processes), len(f.Mounts), len(f.LoopDevices), len(f.Cgroups), len(f.Iptables), len(f.Links), len(f.Sysctls), len(f.Files))
		return nil
	}
	before, err := footprint.Load(file)
	if err != nil {
		return fmt.Errorf("%w: %v (write it with: skewtest footprint save %s)", exitcode.ErrInvalid, err, file)
	}
	diff := footprint.Diff(before, footprint.Take(ctx))
	if len(diff) > 0 {
		return infrastructure(fmt.Errorf("the host is not as it was when %s was saved (%d differences):\n  %s", file, len(diff), strings.Join(diff, "\n  ")))
	}
	fmt.Fprintf(w, "host footprint equal to %s\n", file)
	return nil
}
