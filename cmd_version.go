package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print chatd's version, the commit it was built from and when that commit was made",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine describes this binary: the version set at build time
// (-X main.version), and from the build information Go embeds, the commit
// and its time (a build from a tree with uncommitted changes says
// "+changes") and the Go release. A build outside a git checkout has no
// commit to name and says so.
func versionLine() string {
	commit, when, changed := "unknown", "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value[:min(len(s.Value), 12)]
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				changed = s.Value == "true"
			}
		}
	}
	if changed {
		commit += "+changes"
	}
	line := fmt.Sprintf("chatd %s, commit %s", version, commit)
	if when != "" {
		line += " of " + when
	}
	return line + fmt.Sprintf(", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
