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
// and its time and the Go release.
func versionLine() string {
	commit, when := buildCommit()
	line := fmt.Sprintf("chatd %s, commit %s", version, commit)
	if when != "" {
		line += " of " + when
	}
	return line + fmt.Sprintf(", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildCommit is the commit this binary was built from (its first 12
// digits; "+changes" after them for a tree with uncommitted changes) and
// its time, from the build information Go embeds. A build outside a git
// checkout has no commit to name: "unknown", and no time.
func buildCommit() (commit, when string) {
	commit, changed := "unknown", false
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
	return commit, when
}
