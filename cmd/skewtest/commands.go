package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// command is one verb of skewtest: its name, its arguments as the usage
// line shows them, and what runs it. A verb whose settings are all
// environment variables takes no arguments: one is a mistake, and a help
// flag must never start what it would run.
type command struct {
	name, args   string
	settingsOnly bool
	run          func(ctx context.Context, s streams, args []string) error
}

// streams are where a verb writes: its product to out (what a script
// reads), progress and messages to errOut, logs to logger.
type streams struct {
	logger      *slog.Logger
	out, errOut io.Writer
}

// commands are skewtest's verbs, in the order the usage line lists them;
// each verb's code is in its own file.
var commands = []command{
	{name: "run", settingsOnly: true, run: runCmd},
	{name: "matrix", settingsOnly: true, run: matrixCmd},
	{name: "catalogue", settingsOnly: true, run: catalogueCmd},
	{name: "mutants", settingsOnly: true, run: mutantsCmd},
	{name: "bench", args: "[-rounds N] [-out FILE]", run: benchCmd},
	{name: "bench-scale", args: "[-pods N,...] [-volumes N,...] [-modes M,...] [-out DIR]", run: benchScaleCmd},
	{name: "build", args: "VERSION COMPONENT[,...]", run: buildCmd},
	{name: "build-containerd", settingsOnly: true, run: buildContainerdCmd},
	{name: "kind-node-image", args: "VERSION", run: kindNodeImageCmd},
	{name: "clean", args: "[RUNDIR...]", run: cleanCmd},
	{name: "footprint", args: "save|compare FILE", run: footprintCmd},
	{name: "settings", settingsOnly: true, run: settingsCmd},
	{name: "helpers", args: "DIR", run: helpersCmd},
	{name: "signoff", args: "DIR [-baseline DIR] [-out DIR]", run: signoffCmd},
	{name: "scenarios", settingsOnly: true, run: scenariosCmd},
	{name: "vm", args: "image|up|exec|down", run: vmCmd},
	{name: "janitor-aws", args: "[-dry-run=false]", run: janitorAWSCmd},
}

// usage is the one-line usage of every verb.
func usage() string {
	var verbs []string
	for _, c := range commands {
		verbs = append(verbs, strings.TrimSpace(c.name+" "+c.args))
	}
	return "usage: skewtest " + strings.Join(verbs, " | ")
}

// isHelp reports whether a is a request for help.
func isHelp(a string) bool {
	switch a {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// dispatch runs the verb args[0] with the rest of args.
func dispatch(ctx context.Context, s streams, args []string) error {
	if len(args) < 1 {
		return invalid("%s", usage())
	}
	if isHelp(args[0]) {
		fmt.Fprintln(s.out, usage())
		fmt.Fprintln(s.out, "Settings are environment variables: skewtest settings lists them with their defaults; docs/settings.md explains each.")
		return nil
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		if c.settingsOnly && len(args) > 1 {
			if isHelp(args[1]) {
				fmt.Fprintf(s.out, "usage: skewtest %s\nIt takes no arguments: its settings are environment variables (skewtest settings lists them with their defaults; docs/settings.md explains each).\n", c.name)
				return nil
			}
			return invalid("skewtest %s takes no arguments, got %q: its settings are environment variables (skewtest settings lists them), e.g. PLAN=v1.37.2,v1.36.3 skewtest %s", c.name, strings.Join(args[1:], " "), c.name)
		}
		return c.run(ctx, s, args[1:])
	}
	return invalid("unknown command %q\n%s", args[0], usage())
}
