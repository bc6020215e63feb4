package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema",
		Long: `Create the database, or upgrade its schema to the version this chatd needs, in
place and in one transaction. Running it again does nothing. It prints the
version found and the version reached. (chatd serve does the same on start;
this command lets you do it ahead of time, for example before a deploy.)

A database written by a newer chatd is refused and left untouched.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(_ context.Context, db *store.DB) error {
				from, to := db.MigratedFrom(), db.SchemaVersion()
				switch {
				case from == 0:
					fmt.Fprintf(cmd.OutOrStdout(), "created %s at schema version %d\n", db.Path(), to)
				case from == to:
					fmt.Fprintf(cmd.OutOrStdout(), "%s is already at schema version %d; nothing to do\n", db.Path(), to)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "upgraded %s from schema version %d to %d\n", db.Path(), from, to)
				}
				return nil
			})
		},
	}
}
