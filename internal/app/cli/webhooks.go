package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
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
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			sub, err := c.CreateWebhook(cmd.Context(), client.WebhookRequest{URL: args[0], Events: events, WorkflowID: workflowID, States: states})
			if err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, sub)
			}
			fmt.Fprintf(out, "Subscribed %s (%s) to %s.\n", sub.URL, sub.ID, strings.Join(sub.Events, ", "))
			fmt.Fprintf(out, "Secret (shown once; verify messages with it): %s\n", sub.Secret)
			return nil
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
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			var all []client.WebhookSubscription
			cursor := ""
			for {
				page, err := c.Webhooks(cmd.Context(), cursor, 0)
				if err != nil {
					return agentError(out, f.json, err)
				}
				all = append(all, page.Webhooks...)
				if page.NextCursor == nil {
					break
				}
				cursor = *page.NextCursor
			}
			if f.json {
				return writeJSON(out, map[string]any{"webhooks": all})
			}
			writeWebhooks(out, all)
			return nil
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", s.ID, s.Status, s.URL, strings.Join(s.Events, ","), strings.Join(filter, "; "))
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
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			if err := c.DeleteWebhook(cmd.Context(), args[0]); err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, map[string]any{"deleted": args[0]})
			}
			fmt.Fprintf(out, "Removed %s.\n", args[0])
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func newWebhooksRotateCmd(env *Env) *cobra.Command {
	var f oipFlags
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "rotate ID",
		Short: "Give a subscription a new secret; the old one signs too for --grace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			g := ""
			if grace > 0 {
				g = grace.String()
			}
			sub, err := c.RotateWebhookSecret(cmd.Context(), args[0], g)
			if err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, sub)
			}
			fmt.Fprintf(out, "New secret of %s (shown once): %s\n", sub.ID, sub.Secret)
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "how long the old secret keeps signing (default: the server's, 24h)")
	f.add(cmd)
	return cmd
}

func newWebhooksDeliveriesCmd(env *Env) *cobra.Command {
	var f oipFlags
	var limit int
	cmd := &cobra.Command{
		Use:   "deliveries ID [DELIVERY_ID]",
		Short: "List a subscription's recent deliveries, or show one with its attempts",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			if len(args) == 2 {
				d, err := c.WebhookDelivery(cmd.Context(), args[0], args[1])
				if err != nil {
					return agentError(out, f.json, err)
				}
				if f.json {
					return writeJSON(out, d)
				}
				writeDelivery(out, d)
				return nil
			}
			page, err := c.WebhookDeliveries(cmd.Context(), args[0], "", limit)
			if err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, page)
			}
			writeDeliveries(out, page.Deliveries)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many deliveries, newest first")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", d.ID, d.Type, d.RunID, status, d.Attempts, d.CreatedAt.Format(time.RFC3339), oneLine(d.LastError, 60))
	}
	tw.Flush()
}

func writeDelivery(out io.Writer, d *client.WebhookDelivery) {
	fmt.Fprintf(out, "Delivery %s: %s of run %s, message %s\n", d.ID, d.Type, d.RunID, d.MessageID)
	fmt.Fprintf(out, "Status:   %s after %d attempt(s)\n", d.Status, d.Attempts)
	if d.NextAttemptAt != nil {
		fmt.Fprintf(out, "Next:     %s\n", d.NextAttemptAt.Format(time.RFC3339))
	}
	for _, a := range d.History {
		line := fmt.Sprintf("  #%d %s %s", a.N, a.At.Format(time.RFC3339), a.Class)
		if a.Status != 0 {
			line += fmt.Sprintf(" %d", a.Status)
		}
		line += fmt.Sprintf(" in %.0f ms", a.DurationMS)
		if a.Error != "" {
			line += ": " + oneLine(a.Error, 80)
		}
		fmt.Fprintln(out, line)
	}
	if len(d.Message) > 0 {
		fmt.Fprintf(out, "Message:  %s\n", d.Message)
	}
}

func newWebhooksRedeliverCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "redeliver ID DELIVERY_ID",
		Short: "Send a delivery again now, under its unchanged message id",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			d, err := c.Redeliver(cmd.Context(), args[0], args[1])
			if err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, d)
			}
			fmt.Fprintf(out, "Delivery %s is %s again; it is sent now.\n", d.ID, d.Status)
			return nil
		},
	}
	f.add(cmd)
	return cmd
}
