package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newPurgeCmd() *cobra.Command {
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "purge [--dry-run] [--json]",
		Short: "Delete what the retention periods put out of time, or show what would go",
		Long: `Delete the text messages, events and files older than their room's retention
period (see chatd retention), and print, room by room and kind by kind, how
many went and their bytes. With --dry-run, delete nothing and print what would
go.

A running server does the same by itself (every --purge-interval, and at once
after a retention setting changes); this command is for a server run with
--purge-interval 0 (or none running), and --dry-run shows what the settings in
force would delete before anything is. It works beside a running server: it
deletes a few hundred messages per short write, pausing between them, as the
server's own purge does. Ctrl-C stops it between two writes; the next purge
goes on from there.

A purged message is gone for good: no tombstone is left. The file does not
shrink by itself (SQLite reuses the space); chatd vacuum gives it back.`,
		Example: `  chatd purge --dry-run
  chatd purge --json | jq '.total'`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(_ context.Context, db *store.DB) error {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
				defer stop()
				var report *store.PurgeReport
				var err error
				if dryRun {
					report, err = db.PurgePreview(ctx, store.PurgeOptions{})
				} else {
					report, err = db.Purge(ctx, store.PurgeOptions{Progress: purgeProgress(cmd.ErrOrStderr())})
				}
				if report != nil {
					if perr := printPurge(cmd.OutOrStdout(), asJSON, dryRun, report); perr != nil && err == nil {
						err = perr
					}
				}
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: the next purge goes on from here")
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "delete nothing: print what would be deleted")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"dry_run", "now", "rooms": [...], "total"}`)
	return cmd
}

// purgeProgress reports a long purge's progress on w, every few seconds.
func purgeProgress(w io.Writer) func(store.PurgeLine) {
	var items int64
	last := time.Now()
	return func(l store.PurgeLine) {
		items += l.Count
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(w, "chatd: %s deleted so far\n", count(items))
		}
	}
}

// kindNames name each kind in a report.
var kindNames = map[string][2]string{
	store.KindText: {"text message", "text messages"}, store.KindEvent: {"event", "events"}, store.KindFile: {"file", "files"},
}

func printPurge(w io.Writer, asJSON, dryRun bool, r *store.PurgeReport) error {
	if asJSON {
		return printResult(w, true, purgeJSON(dryRun, r), "")
	}
	verb := "Deleted"
	if dryRun {
		verb = "Would delete"
	}
	if len(r.Lines) == 0 {
		_, err := fmt.Fprintf(w, "%s nothing: no room keeps anything past its retention period.\n", verb)
		return err
	}
	fmt.Fprintf(w, "%s, with the retention periods in force on %s:\n\n", verb, r.Now.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROOM\tTITLE\tKIND\tCOUNT\tBYTES")
	for _, l := range r.Lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.RoomID, title(l.Title), l.Kind, count(l.Count), size(l.Bytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var parts []string
	var bytes int64
	for _, kind := range store.RetentionKinds {
		n, b := r.Total(kind)
		bytes += b
		name := kindNames[kind][1]
		if n == 1 {
			name = kindNames[kind][0]
		}
		parts = append(parts, count(n)+" "+name)
	}
	_, err := fmt.Fprintf(w, "\nIn all: %s (%s).\n", strings.Join(parts, ", "), size(bytes))
	return err
}

// purgeJSON is the report as --json prints it: each room with its kinds'
// counts and bytes, and the totals.
func purgeJSON(dryRun bool, r *store.PurgeReport) map[string]any {
	type tally struct {
		Count int64 `json:"count"`
		Bytes int64 `json:"bytes"`
	}
	rooms := []map[string]any{}
	byRoom := map[string]map[string]any{}
	for _, l := range r.Lines {
		room := byRoom[l.RoomID]
		if room == nil {
			room = map[string]any{"id": l.RoomID, "title": l.Title}
			for _, kind := range store.RetentionKinds {
				room[kind] = tally{}
			}
			byRoom[l.RoomID] = room
			rooms = append(rooms, room)
		}
		room[l.Kind] = tally{l.Count, l.Bytes}
	}
	total := map[string]any{}
	for _, kind := range store.RetentionKinds {
		n, b := r.Total(kind)
		total[kind] = tally{n, b}
	}
	return map[string]any{"dry_run": dryRun, "now": store.FormatTime(r.Now), "rooms": rooms, "total": total}
}

func title(t *string) string {
	if t == nil || *t == "" {
		return "(untitled)"
	}
	if len([]rune(*t)) > 30 {
		return string([]rune(*t)[:29]) + "…"
	}
	return *t
}

// count writes n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// size writes a byte count for people: B, KiB, MiB or GiB.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
