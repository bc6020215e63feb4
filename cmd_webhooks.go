package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/server"
	"github.com/chatd/chatd/server/webhook"
	"github.com/chatd/chatd/store"
)

// The webhook commands manage an agent's webhooks as the person who owns it
// does under /api/v1/me/agents/{id}/webhooks: the same store calls, as that
// person, so the same rules and refusals apply. They sit in one file, as
// they share the agent they act on and how they print an endpoint.

// webhookIDArg is the one argument of the commands that act on one webhook.
func webhookIDArg() cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := exactArgs(1)(cmd, args); err != nil {
			return err
		}
		if strings.TrimSpace(args[0]) == "" {
			return usageError{fmt.Errorf("the webhook's id is empty (chatd list-webhooks --agent … lists them)")}
		}
		return nil
	}
}

func newAddWebhookCmd() *cobra.Command {
	var o ownedAgent
	var nw store.NewWebhook
	var allow, deny []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add-webhook --agent OWNER/SLUG --url URL [--description TEXT]",
		Short: "Add a webhook to an agent and print its signing secret",
		Long: `Add a webhook to an agent: chatd POSTs each new message addressed to the agent
to the URL, signed as Standard Webhooks specifies. The signing secret (whsec_…)
is printed once: store it now, the receiver checks every request with it.

An address webhooks may not reach is refused as over the API: link-local and
cloud metadata addresses always, and the ranges of --webhook-deny unless
--webhook-allow opens them. Give the same ranges as chatd serve has (they read
the same environment variables); the server checks every connection it makes
with its own.`,
		Example: `  chatd add-webhook --agent alice/helper --url https://agents.example.com/hooks/helper
  chatd add-webhook --agent alice/helper --url http://127.0.0.1:9000/hook --description "local worker" --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "url"); err != nil {
				return err
			}
			guard, err := webhookGuard(allow, deny)
			if err != nil {
				return err
			}
			// The URL's form and where it leads need no database: a URL
			// refused is a mistake in the command line, refused before the
			// database is opened.
			if _, err := store.ParseWebhookURL(nw.URL); err != nil {
				return usageError{err}
			}
			if err := server.CheckWebhookURL(cmd.Context(), guard, nw.URL); err != nil {
				return inputError(err)
			}
			return o.run(cmd, func(ctx context.Context, db *store.DB) error {
				w, secret, err := db.CreateWebhook(ctx, o.actor(), o.agent.ID, nw)
				if store.ErrorCode(err) == store.CodeConflict {
					return fmt.Errorf("%s is already a webhook of %s", nw.URL, o.summary())
				} else if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, server.CreatedWebhookJSON(w, secret),
					fmt.Sprintf("Added a webhook to %s: %s (id %s).\n\nSigning secret - shown only now, store it somewhere safe:\n\n  %s\n\n"+
						"The receiver checks the webhook-signature header of each request with it (Standard Webhooks).\n",
						o.summary(), w.URL, w.ID, secret))
			})
		},
	}
	f := cmd.Flags()
	o.bind(f)
	f.StringVar(&nw.URL, "url", "", "where chatd sends the agent's messages: an http:// or https:// URL, at most 2048 bytes (required)")
	f.StringVar(&nw.Description, "description", "", "what the webhook is for, up to 500 characters")
	f.StringSliceVar(&deny, "webhook-deny", nil, "address ranges to refuse besides link-local and cloud metadata addresses, as chatd serve's flag (CIDR ranges or addresses, comma-separated)")
	f.StringSliceVar(&allow, "webhook-allow", nil, "address ranges to accept even where refused otherwise, as chatd serve's flag (CIDR ranges or addresses, comma-separated)")
	f.BoolVar(&asJSON, "json", false, `print the webhook as the API answers it, with its "secret", as one JSON object`)
	envFlag(f, "webhook-allow", "CHATD_WEBHOOK_ALLOW")
	envFlag(f, "webhook-deny", "CHATD_WEBHOOK_DENY")
	return cmd
}

// webhookGuard is the guard of --webhook-allow and --webhook-deny, read as
// chatd serve reads them.
func webhookGuard(allow, deny []string) (*webhook.Guard, error) {
	var g webhook.Guard
	var err error
	if g.Allow, err = webhook.ParsePrefixes(allow); err != nil {
		return nil, usageError{fmt.Errorf("--webhook-allow: %v", err)}
	}
	if g.Deny, err = webhook.ParsePrefixes(deny); err != nil {
		return nil, usageError{fmt.Errorf("--webhook-deny: %v", err)}
	}
	return &g, nil
}

func newListWebhooksCmd() *cobra.Command {
	var o ownedAgent
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list-webhooks --agent OWNER/SLUG",
		Short: "List an agent's webhooks",
		Long: `List the webhooks of an agent, oldest first: each one's id, whether it is active
or paused (and why), its failed attempts in a row, its URL and description.`,
		Example: `  chatd list-webhooks --agent alice/helper
  chatd list-webhooks --agent alice/helper --json | jq -r '.data[] | select(.status == "paused") | .id'`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, func(ctx context.Context, db *store.DB) error {
				hooks, err := db.ListWebhooks(ctx, o.actor(), o.agent.ID)
				if err != nil {
					return err
				}
				if asJSON {
					views := make([]any, len(hooks))
					for i, w := range hooks {
						views[i] = server.WebhookJSON(w)
					}
					return printResult(cmd.OutOrStdout(), true, map[string]any{"data": views}, "")
				}
				return printWebhooks(cmd, &o, hooks)
			})
		},
	}
	o.bind(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"data": [webhooks]}, each as the API answers it`)
	return cmd
}

// printWebhooks prints endpoints as a table, a paused one's reason under it.
func printWebhooks(cmd *cobra.Command, o *ownedAgent, hooks []*store.Webhook) error {
	out := cmd.OutOrStdout()
	if len(hooks) == 0 {
		_, err := fmt.Fprintf(out, "%s has no webhooks; add one with chatd add-webhook.\n", o.summary())
		return err
	}
	fmt.Fprintf(out, "Webhooks of %s:\n\n", o.summary())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tFAILURES\tURL\tDESCRIPTION")
	for _, w := range hooks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", w.ID, webhookStatus(w), w.ConsecutiveFailures, w.URL, w.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range hooks {
		if w.PausedAt != nil {
			fmt.Fprintf(out, "\n%s paused at %s: %s\nResume it with chatd resume-webhook --agent %s %s\n",
				w.ID, w.PausedAt.UTC().Format(time.RFC3339), *w.PauseReason, o.agent.Handle, w.ID)
		}
	}
	return nil
}

func webhookStatus(w *store.Webhook) string {
	if w.PausedAt != nil {
		return "paused"
	}
	return "active"
}

func newRemoveWebhookCmd() *cobra.Command {
	var o ownedAgent
	cmd := &cobra.Command{
		Use:   "remove-webhook --agent OWNER/SLUG WEBHOOK_ID",
		Short: "Remove one of an agent's webhooks",
		Long: `Remove a webhook of an agent, with what was still queued for it and its delivery
log. chatd sends it nothing more; a request already under way still ends.`,
		Example: `  chatd remove-webhook --agent alice/helper 019abc12-3456-7def-8123-456789abcdef`,
		Args:    webhookIDArg(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, func(ctx context.Context, db *store.DB) error {
				w, err := db.Webhook(ctx, o.actor(), o.agent.ID, args[0])
				if err != nil {
					return err
				}
				if err := db.DeleteWebhook(ctx, o.actor(), o.agent.ID, w.ID); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Removed the webhook %s (%s) of %s, with its queue and delivery log.\n",
					w.ID, w.URL, o.summary())
				return err
			})
		},
	}
	o.bind(cmd.Flags())
	return cmd
}

func newResumeWebhookCmd() *cobra.Command {
	var o ownedAgent
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resume-webhook --agent OWNER/SLUG WEBHOOK_ID",
		Short: "Resume a paused webhook of an agent",
		Long: `Resume a webhook that chatd paused (after a run of failed attempts, or because
the receiver answered 410 Gone): its failures count from zero again, and what
was queued for it is sent at once, in order, by a chatd serve running on the
database. Resuming a webhook that is not paused changes nothing.`,
		Example: `  chatd resume-webhook --agent alice/helper 019abc12-3456-7def-8123-456789abcdef`,
		Args:    webhookIDArg(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, func(ctx context.Context, db *store.DB) error {
				before, err := db.Webhook(ctx, o.actor(), o.agent.ID, args[0])
				if err != nil {
					return err
				}
				w, err := db.ResumeWebhook(ctx, o.actor(), o.agent.ID, before.ID)
				if err != nil {
					return err
				}
				text := fmt.Sprintf("Resumed the webhook %s (%s) of %s: what is queued for it is sent now.\n", w.ID, w.URL, o.summary())
				if before.PausedAt == nil {
					text = fmt.Sprintf("The webhook %s (%s) of %s is not paused; nothing changed.\n", w.ID, w.URL, o.summary())
				}
				return printResult(cmd.OutOrStdout(), asJSON, server.WebhookJSON(w), text)
			})
		},
	}
	o.bind(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the webhook as the API answers it, as one JSON object")
	return cmd
}

// maxDeliveriesShown bounds --limit of list-webhook-deliveries, as the API
// bounds a page of the log.
const maxDeliveriesShown = 100

func newListWebhookDeliveriesCmd() *cobra.Command {
	var o ownedAgent
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list-webhook-deliveries --agent OWNER/SLUG WEBHOOK_ID [--limit N]",
		Short: "Show the delivery log of an agent's webhook",
		Long: `Show the delivery log of an agent's webhook, newest message first: for each
message sent to it, whether it was delivered, is pending or failed, the attempts
made, the receiver's HTTP status and latency at the last one, and its error.`,
		Example: `  chatd list-webhook-deliveries --agent alice/helper 019abc12-3456-7def-8123-456789abcdef --limit 5`,
		Args:    webhookIDArg(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > maxDeliveriesShown {
				return usageError{fmt.Errorf("--limit must be from 1 to %d, not %d", maxDeliveriesShown, limit)}
			}
			return o.run(cmd, func(ctx context.Context, db *store.DB) error {
				w, err := db.Webhook(ctx, o.actor(), o.agent.ID, args[0])
				if err != nil {
					return err
				}
				page, err := db.ListWebhookDeliveries(ctx, o.actor(), o.agent.ID, w.ID, store.PageRequest{Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					views := make([]any, len(page.Items))
					for i, d := range page.Items {
						views[i] = server.WebhookDeliveryJSON(d)
					}
					return printResult(cmd.OutOrStdout(), true, map[string]any{"data": views, "has_more": page.HasMore}, "")
				}
				return printDeliveries(cmd, w, page)
			})
		},
	}
	o.bind(cmd.Flags())
	cmd.Flags().IntVar(&limit, "limit", 20, "how many deliveries to show, newest first (at most 100)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"data": [deliveries], "has_more"}, each as the API answers it`)
	return cmd
}

// printDeliveries prints a page of a delivery log as a table.
func printDeliveries(cmd *cobra.Command, w *store.Webhook, page *store.Page[*store.WebhookDelivery]) error {
	out := cmd.OutOrStdout()
	if len(page.Items) == 0 {
		_, err := fmt.Fprintf(out, "Nothing was sent to %s yet.\n", w.URL)
		return err
	}
	fmt.Fprintf(out, "Deliveries to %s, newest first:\n\n", w.URL)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUED\tSTATUS\tATTEMPTS\tHTTP\tLATENCY\tLAST ATTEMPT\tMESSAGE\tERROR")
	for _, d := range page.Items {
		status := d.Status
		if d.NextAttemptAt != nil {
			status += ", next " + cliTime(d.NextAttemptAt)
		}
		code, latency, lastErr := "-", "-", ""
		if d.LastStatusCode != nil {
			code = fmt.Sprint(*d.LastStatusCode)
		}
		if d.LastLatency != nil {
			latency = d.LastLatency.String()
		}
		if d.LastError != nil {
			lastErr = strings.ReplaceAll(*d.LastError, "\n", " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cliTime(&d.InsertedAt), status, d.Attempts, code, latency,
			cliTime(d.LastAttemptAt), d.MessageID, lastErr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.HasMore {
		_, err := fmt.Fprintf(out, "\nOlder deliveries follow: raise --limit (at most %d) to see more.\n", maxDeliveriesShown)
		return err
	}
	return nil
}

// cliTime is a time as the webhook commands print it, in UTC; "-" for none.
func cliTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
