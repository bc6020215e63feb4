package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newRestoreCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the database with a backup (the server must be stopped)",
		Long: `Put the backup FILE (written by chatd backup) where --db points, so that the
next chatd serve starts on it.

Before touching anything it checks that:
  - no chatd serve is using the database (stop it first; a server killed with
    SIGKILL does not count: its lock went with it; on Windows, which has no
    flock, it cannot tell, so make sure yourself),
  - FILE passes SQLite's integrity check and is a chatd database this chatd
    can serve (an older schema is fine: serve upgrades it on start),
  - the database does not exist yet, unless --force is given.
If any check fails it changes nothing and exits non-zero.

The copy is written beside the database, synced, and renamed over it, so the
database is at every moment either the old one or the complete backup. The
old database's -wal and -shm files are removed (after folding the WAL into the
old file), so that nothing of the old database leaks into the restored one.
The restored database keeps the owner, group and mode of the one it replaces,
so a restore run as root leaves a file the service's user can still open; when
it cannot give it that owner (run by another user than root) it refuses and
changes nothing. A new database is created with mode 0600 and, restored by
root, gets its folder's owner and group; a lock file it creates gets the
database's owner and group. FILE itself is only read. Let other chatd commands on the database (such
as create-user) finish first: they do not hold the server's lock.`,
		Example: `  systemctl stop chatd
  chatd restore --db /var/lib/chatd/chatd.db --force /var/backups/chatd-2026-11-22.db
  systemctl start chatd`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDatabaseFile(cmd, func(ctx context.Context, db string) error {
				if err := store.Restore(ctx, args[0], db, schemaSQL, force); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "restored %s from %s (integrity check ok); start chatd serve on it\n", db, args[0])
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace the database at --db if it exists (its data is lost)")
	return cmd
}
