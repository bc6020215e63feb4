package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newMigrateCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "migrate [--dry-run]",
		Short: "Create or upgrade the database schema",
		Long: `Create the database, or upgrade its schema to the version this chatd needs, in
place and in one transaction. Running it again does nothing. It prints the
version found and the version reached. (chatd serve does the same on start;
this command lets you do it ahead of time, for example before a deploy.)

A database written by a newer chatd is refused and left untouched.

With --dry-run, nothing is changed, and nothing is created: it prints the
version found, the version this chatd needs, and the statements each upgrade
step would run, by what they create or alter and the tables whose rows they
write; or that it would create the database, or that there is nothing to do.
It refuses what migrate refuses, in the same words.`,
		Example: `  chatd migrate --dry-run
  chatd migrate --database-url postgres://chatd@db.internal/chatd --dry-run`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun {
				return planMigration(cmd)
			}
			return withStore(cmd, func(_ context.Context, db *store.DB) error {
				from, to, name := db.MigratedFrom(), db.SchemaVersion(), shownName(db.Path())
				switch {
				case from == 0:
					fmt.Fprintf(cmd.OutOrStdout(), "created %s at schema version %d\n", name, to)
				case from == to:
					fmt.Fprintf(cmd.OutOrStdout(), "%s is already at schema version %d; nothing to do\n", name, to)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "upgraded %s from schema version %d to %d\n", name, from, to)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing: print the schema version found, the one needed, and what each upgrade step would run")
	return cmd
}

// planMigration prints what chatd migrate would do to the database, which
// it reads without changing it.
func planMigration(cmd *cobra.Command) error {
	location, err := databasePath(cmd)
	if err != nil {
		return err
	}
	plan, err := store.PlanMigration(context.Background(), location,
		store.Options{Schema: schemaSQL, PostgresSchema: postgresSchemaSQL})
	if err != nil {
		return err
	}
	printMigrationPlan(cmd.OutOrStdout(), plan)
	return nil
}

func printMigrationPlan(w io.Writer, p *store.MigrationPlan) {
	switch {
	case p.Create && !p.Exists:
		fmt.Fprintf(w, "no database at %s; chatd migrate would create it, with the whole schema at version %d\n", p.Database, p.To)
	case p.Create:
		fmt.Fprintf(w, "%s holds no chatd schema yet; chatd migrate would create the whole schema in it, at version %d\n", p.Database, p.To)
	case p.From == p.To:
		fmt.Fprintf(w, "%s is already at schema version %d; nothing to do\n", p.Database, p.To)
		return
	default:
		fmt.Fprintf(w, "%s is at schema version %d; chatd migrate would upgrade it to version %d, in one transaction:\n", p.Database, p.From, p.To)
		for _, step := range p.Steps {
			fmt.Fprintf(w, "  version %d:\n", step.Version)
			for _, st := range step.Statements {
				if st.Data {
					fmt.Fprintf(w, "    %s (writes rows)\n", st.Head)
				} else {
					fmt.Fprintf(w, "    %s\n", st.Head)
				}
			}
		}
	}
	fmt.Fprintln(w, "dry run: nothing was changed")
}
