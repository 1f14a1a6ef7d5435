package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/protocol"
)

func init() { register(newWebhooksCmd) }

// --- asmp webhooks -----------------------------------------------------------

func newWebhooksCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Manage webhook subscriptions: add, list, rm, rotate, deliveries, redeliver",
		Long: `Manage a server's webhook subscriptions (SPEC section 18; the token needs the
admin scope). A subscription names a URL and the event types to POST there,
signed the Standard Webhooks way; docs/WEBHOOKS.md shows how to verify them.`,
		Example: `  asmp webhooks add https://hooks.example.com/asmp --events run.completed,run.failed
  asmp webhooks list
  asmp webhooks deliveries wh_0193…
  asmp webhooks redeliver wh_0193… dlv_5f2c…`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newWebhooksAddCmd(env), newWebhooksListCmd(env), newWebhooksRmCmd(env), newWebhooksRotateCmd(env),
		newWebhooksDeliveriesCmd(env), newWebhooksRedeliverCmd(env))
	return cmd
}

// remoteCall is the RunE body of a command that makes one call to the
// server (--server, $ASMP_URL, $ASMP_TOKEN) and prints its answer: as the
// server sent it with --json, else as text. Every refusal is the
// server's hint (a JSON error with --json).
func remoteCall[T any](cmd *cobra.Command, env *Env, f *oipFlags, call func(context.Context, *client.Client) (T, error), text func(io.Writer, T)) error {
	out := cmd.OutOrStdout()
	c, err := f.client(env, false)
	if err != nil {
		return agentError(out, f.json, err)
	}
	v, err := call(cmd.Context(), c)
	if err != nil {
		return agentError(out, f.json, err)
	}
	if f.json {
		return writeJSON(out, v)
	}
	text(out, v)
	return nil
}

func newWebhooksAddCmd(env *Env) *cobra.Command {
	var f oipFlags
	var events, states []string
	var workflowID string
	cmd := &cobra.Command{
		Use:   "add URL",
		Short: "Subscribe URL to run events; prints the secret once",
		Long: `Subscribe URL to the given event types (run.created, run.state_changed,
run.completed, run.failed, task.progress), optionally only for one workflow
or for runs entering given states. The secret that signs the messages is
printed this once: store it with the receiver.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (*client.WebhookSubscription, error) {
				return c.CreateWebhook(ctx, client.WebhookRequest{URL: args[0], Events: events, WorkflowID: workflowID, States: states})
			}, func(out io.Writer, sub *client.WebhookSubscription) {
				fmt.Fprintf(out, "Subscribed %s (%s) to %s.\n", oneLine(sub.URL, 300), oneLine(sub.ID, 64), oneLine(strings.Join(sub.Events, ", "), 200))
				fmt.Fprintf(out, "Secret (shown once; verify messages with it): %s\n", oneLine(sub.Secret, 200))
			})
		},
	}
	cmd.Flags().StringSliceVar(&events, "events", []string{protocol.WebhookRunCreated, protocol.WebhookRunStateChanged, protocol.WebhookRunCompleted, protocol.WebhookRunFailed}, "event types, comma-separated")
	cmd.Flags().StringVar(&workflowID, "workflow", "", "only runs of this workflow")
	cmd.Flags().StringSliceVar(&states, "states", nil, "only runs entering these states, comma-separated")
	f.add(cmd)
	return cmd
}

func newWebhooksListCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the webhook subscriptions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (*client.WebhookList, error) {
				all := &client.WebhookList{Webhooks: []client.WebhookSubscription{}}
				for cursor := ""; ; {
					page, err := c.Webhooks(ctx, cursor, 0)
					if err != nil {
						return nil, err
					}
					all.Webhooks = append(all.Webhooks, page.Webhooks...)
					if page.NextCursor == nil {
						return all, nil
					}
					cursor = *page.NextCursor
				}
			}, func(out io.Writer, l *client.WebhookList) { writeWebhooks(out, l.Webhooks) })
		},
	}
	f.add(cmd)
	return cmd
}

func writeWebhooks(out io.Writer, subs []client.WebhookSubscription) {
	if len(subs) == 0 {
		fmt.Fprintln(out, "No webhook subscriptions.")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tURL\tEVENTS\tFILTER\t")
	for _, s := range subs {
		filter := []string{}
		if s.WorkflowID != "" {
			filter = append(filter, "workflow "+s.WorkflowID)
		}
		if len(s.States) > 0 {
			filter = append(filter, "states "+strings.Join(s.States, ","))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", oneLine(s.ID, 64), oneLine(s.Status, 16), oneLine(s.URL, 200), oneLine(strings.Join(s.Events, ","), 120), oneLine(strings.Join(filter, "; "), 120))
	}
	tw.Flush()
}

func newWebhooksRmCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a webhook subscription and its deliveries",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (map[string]any, error) {
				return map[string]any{"deleted": args[0]}, c.DeleteWebhook(ctx, args[0])
			}, func(out io.Writer, _ map[string]any) { fmt.Fprintf(out, "Removed %s.\n", oneLine(args[0], 64)) })
		},
	}
	f.add(cmd)
	return cmd
}

func newWebhooksRotateCmd(env *Env) *cobra.Command {
	var f oipFlags
	var grace string
	cmd := &cobra.Command{
		Use:   "rotate ID",
		Short: "Give a subscription a new secret; the old one signs too for --grace",
		Long: `Give a subscription a new secret, printed this once. The old secret keeps
signing beside it for --grace (default 24h), so the receiver can switch;
--grace 0 revokes the old secret at once (a leaked secret).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (*client.WebhookSubscription, error) {
				return c.RotateWebhookSecret(ctx, args[0], grace)
			}, func(out io.Writer, sub *client.WebhookSubscription) {
				fmt.Fprintf(out, "New secret of %s (shown once): %s\n", oneLine(sub.ID, 64), oneLine(sub.Secret, 200))
			})
		},
	}
	cmd.Flags().StringVar(&grace, "grace", "", `how long the old secret keeps signing, e.g. 1h or 2d; 0 revokes it now (default: the server's, 24h)`)
	f.add(cmd)
	return cmd
}

func newWebhooksDeliveriesCmd(env *Env) *cobra.Command {
	var f oipFlags
	var limit int
	var cursor string
	cmd := &cobra.Command{
		Use:   "deliveries ID [DELIVERY_ID]",
		Short: "List a subscription's recent deliveries, or show one with its attempts",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("limit") && limit < 1 {
				return agentError(cmd.OutOrStdout(), f.json, fmt.Errorf("--limit must be a positive number (of deliveries; with DELIVERY_ID, of its attempts), not %d", limit))
			}
			if len(args) == 2 {
				return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (*client.WebhookDelivery, error) {
					n := 0 // the server's page of attempts (50) unless --limit says
					if cmd.Flags().Changed("limit") {
						n = limit
					}
					return c.WebhookDeliveryPage(ctx, args[0], args[1], cursor, n)
				}, func(out io.Writer, d *client.WebhookDelivery) { writeDelivery(out, d, args[0], args[1]) })
			}
			return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (*client.WebhookDeliveryList, error) {
				return c.WebhookDeliveries(ctx, args[0], cursor, limit)
			}, func(out io.Writer, l *client.WebhookDeliveryList) {
				writeDeliveries(out, l.Deliveries)
				if l.NextCursor != nil {
					fmt.Fprintf(out, "More: asmp webhooks deliveries %s --cursor %s\n", command.Quote(oneLine(args[0], 300)), command.Quote(oneLine(*l.NextCursor, 300)))
				}
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many deliveries, newest first (with DELIVERY_ID: how many of its attempts, oldest first; default 50)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the page a previous answer named (of deliveries; with DELIVERY_ID, of its attempts)")
	f.add(cmd)
	return cmd
}

func writeDeliveries(out io.Writer, ds []client.WebhookDelivery) {
	if len(ds) == 0 {
		fmt.Fprintln(out, "No deliveries.")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tTYPE\tRUN\tSTATUS\tATTEMPTS\tCREATED\tLAST ERROR\t")
	for _, d := range ds {
		status := d.Status
		if d.NextAttemptAt != nil {
			status += " (next " + d.NextAttemptAt.Format(time.RFC3339) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", oneLine(d.ID, 64), oneLine(d.Type, 40), oneLine(d.RunID, 64), oneLine(status, 60), d.Attempts, d.CreatedAt.Format(time.RFC3339), oneLine(d.LastError, 60))
	}
	tw.Flush()
}

func writeDelivery(out io.Writer, d *client.WebhookDelivery, sub, id string) {
	fmt.Fprintf(out, "Delivery %s: %s of run %s, message %s\n", oneLine(d.ID, 64), oneLine(d.Type, 40), oneLine(d.RunID, 64), oneLine(d.MessageID, 64))
	fmt.Fprintf(out, "Status:   %s after %d attempt(s)\n", oneLine(d.Status, 16), d.Attempts)
	if d.NextAttemptAt != nil {
		fmt.Fprintf(out, "Next:     %s\n", d.NextAttemptAt.Format(time.RFC3339))
	}
	for _, a := range d.History {
		line := fmt.Sprintf("  #%d %s %s", a.N, a.At.Format(time.RFC3339), oneLine(a.Class, 32))
		if a.Status != 0 {
			line += fmt.Sprintf(" %d", a.Status)
		}
		line += fmt.Sprintf(" in %.0f ms", a.DurationMS)
		if a.Error != "" {
			line += ": " + oneLine(a.Error, 80)
		}
		fmt.Fprintln(out, line)
		if a.Answer != "" {
			fmt.Fprintf(out, "     answer: %s\n", oneLine(a.Answer, 200))
		}
	}
	if d.HistoryNextCursor != nil {
		fmt.Fprintf(out, "  … more attempts: asmp webhooks deliveries %s %s --cursor %s\n", sub, id, *d.HistoryNextCursor)
	}
	if len(d.Message) > 0 {
		fmt.Fprintf(out, "Message:  %s\n", oneLine(string(d.Message), 2000))
	}
}

func newWebhooksRedeliverCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "redeliver ID DELIVERY_ID",
		Short: "Send a delivery again now, under its unchanged message id",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return remoteCall(cmd, env, &f, func(ctx context.Context, c *client.Client) (*client.WebhookDelivery, error) {
				return c.Redeliver(ctx, args[0], args[1])
			}, func(out io.Writer, d *client.WebhookDelivery) {
				fmt.Fprintf(out, "Delivery %s is %s again; it is sent now.\n", oneLine(d.ID, 64), oneLine(d.Status, 16))
			})
		},
	}
	f.add(cmd)
	return cmd
}
