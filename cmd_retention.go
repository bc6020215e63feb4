package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newRetentionCmd() *cobra.Command {
	var org string
	var asJSON bool
	days := map[string]*string{store.KindText: new(string), store.KindEvent: new(string), store.KindFile: new(string)}
	cmd := &cobra.Command{
		Use:   "retention [--org NAME] [--text-days N|forever] [--event-days N|forever] [--file-days N|forever]",
		Short: "Show or set how long an organization's rooms keep messages, events and files",
		Long: `Show an organization's retention, or set the kinds given (the others stay as
they are), as an admin of the organization does in the web app or with
PUT /api/v1/me/organization/retention.

Text messages, events (thoughts, tool calls and results, errors, tasks, …) and
files are each kept for their own number of days, from 1 to 36500, or forever
(the default). A room's owner may shorten them for the room. A running server
applies a change within a second: what is older is deleted for good, in small
steps (chatd purge --dry-run shows what would go).`,
		Example: `  chatd retention
  chatd retention --text-days 365 --event-days 30 --file-days 90
  chatd retention --org research --event-days forever`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			change, err := retentionChange(cmd, days)
			if err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, db *store.DB) error {
				r, err := db.OrganizationRetentionByName(ctx, org)
				if store.ErrorCode(err) == store.CodeNotFound {
					return fmt.Errorf("no organization is named %q", org)
				} else if err != nil {
					return err
				}
				if change != nil {
					if r, err = db.SetOrganizationRetentionByName(ctx, org, change(r.Periods)); err != nil {
						return err
					}
				}
				return printResult(cmd.OutOrStdout(), asJSON, retentionJSON(r), describeRetention(org, r))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", store.DefaultOrganization, "the organization's name")
	f.StringVar(days[store.KindText], "text-days", "", `days text messages are kept (1 to 36500), or "forever"`)
	f.StringVar(days[store.KindEvent], "event-days", "", `days events (thoughts, tool calls and results, …) are kept (1 to 36500), or "forever"`)
	f.StringVar(days[store.KindFile], "file-days", "", `days files are kept (1 to 36500), or "forever"`)
	f.BoolVar(&asJSON, "json", false, `print the retention as the API answers it, as one JSON object`)
	return cmd
}

// retentionChange reads the --*-days flags given: nil when none was, or
// what sets them on the periods in force.
func retentionChange(cmd *cobra.Command, days map[string]*string) (func(store.Periods) store.Periods, error) {
	set := map[string]*int{}
	for kind, flag := range map[string]string{store.KindText: "text-days", store.KindEvent: "event-days", store.KindFile: "file-days"} {
		if !cmd.Flags().Changed(flag) {
			continue
		}
		v := strings.TrimSpace(*days[kind])
		if strings.EqualFold(v, "forever") {
			set[kind] = nil
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxRetentionDays {
			return nil, usageError{fmt.Errorf(`--%s must be a number of days from 1 to %d, or "forever", not %q`, flag, store.MaxRetentionDays, v)}
		}
		set[kind] = &n
	}
	if len(set) == 0 {
		return nil, nil
	}
	return func(p store.Periods) store.Periods {
		for kind, d := range set {
			switch kind {
			case store.KindText:
				p.TextDays = d
			case store.KindEvent:
				p.EventDays = d
			default:
				p.FileDays = d
			}
		}
		return p
	}, nil
}

// retentionJSON is a retention as GET /api/v1/me/organization/retention
// answers it.
func retentionJSON(r *store.Retention) map[string]any {
	var at any
	if r.UpdatedAt != nil {
		at = store.FormatTime(*r.UpdatedAt)
	}
	return map[string]any{"text_days": r.TextDays, "event_days": r.EventDays, "file_days": r.FileDays, "updated_at": at}
}

func describeRetention(org string, r *store.Retention) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Retention of the organization %s:\n", org)
	for _, k := range []struct {
		label string
		days  *int
	}{{"text messages", r.TextDays}, {"events", r.EventDays}, {"files", r.FileDays}} {
		kept := "kept forever"
		if k.days != nil {
			kept = fmt.Sprintf("%d days", *k.days)
		}
		fmt.Fprintf(&b, "  %-14s %s\n", k.label, kept)
	}
	if r.UpdatedAt != nil {
		fmt.Fprintf(&b, "Set %s.\n", r.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}
