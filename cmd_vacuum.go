package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newVacuumCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "vacuum",
		Short: "Give the database's free space back to the disk (the server must be stopped)",
		Long: `Rewrite the database file without its free pages, so that it shrinks: a purge
or a deleted room's files free space inside the file, which SQLite reuses for
what is written later but never gives back by itself. First it merges the
search indexes, which keep what a purge deleted (and a record of the
deletion) until they merge their segments. It prints the size before and
after (database and WAL).

It rewrites the whole file, holding the database for as long as that takes
(seconds per gigabyte) and needing as much free disk again as the database
takes, so it refuses while a chatd serve uses the database: stop the server,
vacuum, start it again. (chatd backup, which runs beside a server, also writes
a compacted copy.)`,
		Example: `  systemctl stop chatd
  chatd vacuum --db /var/lib/chatd/chatd.db
  systemctl start chatd`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDatabaseFile(cmd, func(ctx context.Context, db string) error {
				before, after, err := store.Vacuum(ctx, db)
				if err == store.ErrServerRunning {
					return fmt.Errorf("a chatd server is using %s; stop it before vacuuming", db)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "vacuumed %s: %s before, %s after\n", db, size(before), size(after))
				return nil
			})
		},
	}
}
