package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newStatsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--json]",
		Short: "Show what the database holds and where its bytes go",
		Long: `Show the database's size, its write-ahead log's, and the free space inside it
(what chatd vacuum gives back); the rows of each table; the rooms, messages and
files of every organization; the largest rooms by messages and by bytes; and
the messages of each of the last 30 days (UTC).

It only reads, in one read transaction, so it runs beside a running server
without holding up its writes; it takes a few seconds per million messages.`,
		Example: `  chatd stats
  chatd stats --json | jq '.database.tables.messages'`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, db *store.DB) error {
				s, err := db.Stats(ctx, "", time.Now())
				if err != nil {
					return err
				}
				if asJSON {
					return printResult(cmd.OutOrStdout(), true, statsJSON(shownName(db.Path()), s), "")
				}
				return printStats(cmd.OutOrStdout(), shownName(db.Path()), s)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"database", "rooms", "messages", "files", "file_bytes", "largest_rooms_by_messages", "largest_rooms_by_bytes", "messages_per_day"}`)
	return cmd
}

func printStats(w io.Writer, path string, s *store.Stats) error {
	if s.SQLiteFile {
		fmt.Fprintf(w, "Database %s: %s, WAL %s, free inside %s (chatd vacuum gives it back)\n", path,
			size(s.DatabaseBytes), size(s.WALBytes), size(s.FreeBytes))
	} else {
		fmt.Fprintf(w, "Database %s: %s (PostgreSQL's autovacuum reclaims free space)\n", path, size(s.DatabaseBytes))
	}
	fmt.Fprintf(w, "%s rooms, %s messages, %s files (%s)\n\nRows per table:\n", count(s.Rooms), count(s.Messages),
		count(s.Files), size(s.FileBytes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range s.Tables {
		fmt.Fprintf(tw, "  %s\t%s\n", t.Name, count(t.Rows))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, list := range []struct {
		heading string
		rooms   []store.RoomSize
	}{{"The largest rooms by messages", s.LargestByMessages}, {"The largest rooms by bytes", s.LargestByBytes}} {
		fmt.Fprintf(w, "\n%s:\n", list.heading)
		if len(list.rooms) == 0 {
			fmt.Fprintln(w, "  (none)")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROOM\tTITLE\tMESSAGES\tMESSAGE BYTES\tFILE BYTES")
		for _, r := range list.rooms {
			t := title(r.Title)
			if r.Deleted {
				t += " (deleted)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.ID, t, count(r.Messages), size(r.MessageBytes), size(r.FileBytes))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nMessages per day (UTC):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DAY\tTEXTS\tEVENTS")
	for _, d := range s.Days {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Day, count(d.Texts), count(d.Events))
	}
	return tw.Flush()
}

// statsJSON is the report as --json prints it, in the shape of the API's
// GET /api/v1/me/organization/stats (for every organization).
func statsJSON(path string, s *store.Stats) map[string]any {
	tables := map[string]int64{}
	for _, t := range s.Tables {
		tables[t.Name] = t.Rows
	}
	rooms := func(list []store.RoomSize) []map[string]any {
		out := []map[string]any{}
		for _, r := range list {
			out = append(out, map[string]any{"id": r.ID, "title": r.Title, "deleted": r.Deleted, "messages": r.Messages,
				"message_bytes": r.MessageBytes, "file_bytes": r.FileBytes})
		}
		return out
	}
	days := []map[string]any{}
	for _, d := range s.Days {
		days = append(days, map[string]any{"day": d.Day, "texts": d.Texts, "events": d.Events})
	}
	return map[string]any{
		"database": map[string]any{"path": path, "bytes": s.DatabaseBytes, "wal_bytes": s.WALBytes, "free_bytes": s.FreeBytes,
			"tables": tables},
		"rooms": s.Rooms, "messages": s.Messages, "files": s.Files, "file_bytes": s.FileBytes,
		"largest_rooms_by_messages": rooms(s.LargestByMessages), "largest_rooms_by_bytes": rooms(s.LargestByBytes),
		"messages_per_day": days,
	}
}
