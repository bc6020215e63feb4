package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newRotateAgentKeyCmd() *cobra.Command {
	var o ownedAgent
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rotate-agent-key --agent OWNER/SLUG",
		Short: "Replace an agent's API key with a new one and print it",
		Long: `Replace the Agent API key of an agent - one lost, or feared leaked - with a new
one, and print it. The agent keeps its rooms, contacts and history.

The old key stops working at once; a chatd serve running on the same database
notices within a second and closes the agent's connections opened with it.
Delegated tokens the agent obtained with the old key end too; grants not yet
exchanged stay (exchanging one takes the new key). The new key is shown once:
store it now (chatd keeps only a hash).`,
		Example: `  chatd rotate-agent-key --agent alice/helper
  chatd rotate-agent-key --agent alice/helper --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, func(ctx context.Context, db *store.DB) error {
				a, key, err := db.RotateAgentKey(ctx, o.owner, o.agent.ID)
				if err != nil {
					return err
				}
				return printNewKey(cmd, asJSON, agentKey, a.ID, a.Handle, key,
					"Replaced the key of "+agentSummary(a, o.owner)+". The old key no longer works.")
			})
		},
	}
	f := cmd.Flags()
	o.bind(f)
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"id", "handle", "api_key"} instead of text`)
	return cmd
}
