package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newBackupCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the database, even while the server runs",
		Long: `Write a consistent copy of the database to FILE while chatd serve keeps running.
The copy is one self-contained SQLite file (messages, files, keys and the
token-signing secret), checked with SQLite's integrity check before it is moved
into place; FILE is never left half-written, and its folder is created if
missing. FILE is created readable by its owner only (mode 0600): it holds
every key hash and the secret that signs tokens. An existing FILE is kept
unless --force is given. FILE is never the
database itself or one of its -wal, -shm, -journal or .lock files, by
whatever path (relative, a symbolic or hard link), even with --force:
replacing one of those under a running server would destroy its data.

To restore, stop the server and run chatd restore FILE.`,
		Example: `  chatd backup /var/backups/chatd-$(date +%F).db`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return usageError{fmt.Errorf("FILE is empty: name the backup file to write (see %s --help)", cmd.CommandPath())}
			}
			return withDatabaseFile(cmd, func(ctx context.Context, db string) error {
				if err := store.Backup(ctx, db, args[0], force); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s (integrity check ok)\n", db, args[0])
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}
